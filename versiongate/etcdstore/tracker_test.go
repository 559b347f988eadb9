package etcdstore_test

import (
	"context"
	"strconv"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/reconkit/reconkit/versiongate"
	"github.com/reconkit/reconkit/versiongate/etcdstore"
	"github.com/reconkit/reconkit/versiongate/versiongatetest"
)

// compactingStore compacts the store's history past the revision the
// gate's first watch starts from, after writing two more records: that
// watch fails with etcd's ErrCompacted, and the changes it missed are
// known only to a new listing.
type compactingStore struct {
	versiongate.Store
	t   *testing.T
	cli *clientv3.Client

	once     sync.Once
	mu       sync.Mutex
	watchErr error
}

func (s *compactingStore) WatchRecords(ctx context.Context, rev int64, fn func([]versiongate.Record, int64)) error {
	first := false
	s.once.Do(func() {
		first = true
		putRegistry(s.t, s.cli, "b", "0.9.0")
		last := putRegistry(s.t, s.cli, "c", "1.3.0")
		_, err := s.cli.Compact(ctx, last)
		require.NoError(s.t, err)
	})
	err := s.Store.WatchRecords(ctx, rev, fn)
	if first {
		s.mu.Lock()
		s.watchErr = err
		s.mu.Unlock()
	}
	return err
}

func (s *compactingStore) firstWatchErr() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.watchErr
}

// A watch that starts below the compacted revision fails with
// ErrCompacted; the gate answers such a failure by listing again, and the
// new listing reflects every change.
func TestGateRelistsAfterCompaction(t *testing.T) {
	_, cli := etcdClient(t)
	ctx := testContext(t)
	putRegistry(t, cli, "a", "1.0.0")
	st := &compactingStore{Store: etcdStore(t, cli), t: t, cli: cli}
	g, err := versiongate.New(versiongate.Config{
		Store: st, NodeID: "a", Version: ver(t, "1.0.0"), MinimumCompatibleRelease: rel(t, "1.0.0"), Decode: decodeRegistry,
		Candidate: versiongate.CandidateFunc(func(ctx context.Context) (versiongate.Term, error) { <-ctx.Done(); return nil, ctx.Err() }),
		Reconcile: func(context.Context, versiongate.Term) error { return nil },
	})
	require.NoError(t, err)
	runGate(t, ctx, g)
	require.NoError(t, versiongatetest.WaitNodes(ctx, g, 3))
	require.ErrorIs(t, st.firstWatchErr(), rpctypes.ErrCompacted)
	r, _ := g.Releases()
	require.Equal(t, rel(t, "0.9.0"), r.Min)
	require.Equal(t, rel(t, "1.3.0"), r.Max)
	require.Equal(t, []versiongate.Node{{ID: "b", Release: rel(t, "0.9.0")}}, g.Blocking())
}

// A listing larger than one page is read in pages at one revision.
func TestListRecordsPages(t *testing.T) {
	_, cli := etcdClient(t)
	ctx := testContext(t)
	n := etcdstore.ListPageSize*2 + 7
	var ops []clientv3.Op
	for i := 0; i < n; i++ {
		ops = append(ops, clientv3.OpPut(testNodesPrefix+"n"+strconv.Itoa(i), "x"))
		if len(ops) == 100 || i == n-1 {
			_, err := cli.Txn(ctx).Then(ops...).Commit()
			require.NoError(t, err)
			ops = ops[:0]
		}
	}
	recs, rev, err := etcdStore(t, cli).ListRecords(ctx)
	require.NoError(t, err)
	require.Len(t, recs, n)
	seen := map[string]bool{}
	for _, r := range recs {
		seen[r.ID] = true
	}
	require.Len(t, seen, n, "no record listed twice")
	resp, err := cli.Get(ctx, "x")
	require.NoError(t, err)
	require.Equal(t, resp.Header.Revision, rev)
}
