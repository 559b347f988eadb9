package etcdstore_test

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	"go.etcd.io/etcd/client/v3/namespace"

	"github.com/reconkit/reconkit/election/etcd"
	"github.com/reconkit/reconkit/internal/testenv"
	"github.com/reconkit/reconkit/versiongate"
	"github.com/reconkit/reconkit/versiongate/etcdstore"
	"github.com/reconkit/reconkit/versiongate/versiongatetest"
)

// A store on a namespaced client, with reconkit's etcd election on the
// plain client: the election's guard compares a key the store's
// transactions cannot see, so the store fences those terms by their
// tokens. The gate reconciles and writes its status, and a later term's
// fence still refuses the earlier term's writes.
func TestNamespacedStoreWithElectionOnPlainClient(t *testing.T) {
	e := testenv.Etcd(t)
	cli := e.Client(t)
	ctx := testContext(t)
	nsCli := e.Client(t)
	nsCli.KV = namespace.NewKV(nsCli.KV, "/ns")
	nsCli.Watcher = namespace.NewWatcher(nsCli.Watcher, "/ns")
	nsCli.Lease = namespace.NewLease(nsCli.Lease, "/ns")
	st, err := etcdstore.New(nsCli, etcdstore.Config{StatusKey: "/gate/status", NodesPrefix: "/gate/nodes/"})
	require.NoError(t, err)

	el, err := etcd.New(etcd.Config{Client: cli, Prefix: "/gate/leader", Identity: "a"})
	require.NoError(t, err)
	t.Cleanup(func() { _ = el.Close() })
	var mu sync.Mutex
	var term *etcd.Leadership
	rec := &reconcileRecorder{}
	g, err := versiongate.New(versiongate.Config{
		Store: st, NodeID: "a", Version: ver(t, "1.0.0"), SettleTime: -1,
		Candidate: versiongate.CandidateOf(func(ctx context.Context) (*etcd.Leadership, error) {
			l, err := el.CampaignEtcd(ctx)
			if err == nil {
				mu.Lock()
				term = l
				mu.Unlock()
			}
			return l, err
		}),
		Reconcile: rec.reconcile,
	})
	require.NoError(t, err)
	runGate(t, ctx, g)
	require.NoError(t, versiongatetest.WaitPhase(ctx, g, versiongate.PhaseDone))
	require.NoError(t, recv(t, waitReady(t, ctx, g), "WaitReady"))

	resp, err := cli.Get(ctx, "/ns/gate/status")
	require.NoError(t, err)
	require.Len(t, resp.Kvs, 1, "the status is in the store's keyspace")
	mu.Lock()
	l := term
	mu.Unlock()
	fence, err := cli.Get(ctx, "/ns/gate/status.fence")
	require.NoError(t, err)
	require.Len(t, fence.Kvs, 1, "the term was fenced by its token")
	require.Equal(t, l.Token(), rec.calls()[0])

	// The term writes while it is the newest; once a later term fenced
	// the store, it cannot.
	require.NoError(t, st.WriteStatus(ctx, l, resp.Kvs[0].Value, 0))
	require.NoError(t, st.Fence(ctx, versiongatetest.NewTerm("successor", l.Token()+1)))
	require.ErrorIs(t, st.WriteStatus(ctx, l, []byte("late"), 0), versiongate.ErrLeadershipLost)
	after, err := cli.Get(ctx, "/ns/gate/status")
	require.NoError(t, err)
	require.Equal(t, resp.Kvs[0].Value, after.Kvs[0].Value)
}

// A guarded term whose key the store can see, and which has ended, is
// refused by its guard, not let through by its token: the fallback is only
// for a guard outside the store's keyspace.
func TestEndedGuardedTermInTheStoresKeyspaceIsRefused(t *testing.T) {
	_, cli := etcdClient(t)
	ctx := testContext(t)
	st := etcdStore(t, cli)
	el, err := etcd.New(etcd.Config{Client: cli, Prefix: testElection, Identity: "a"})
	require.NoError(t, err)
	t.Cleanup(func() { _ = el.Close() })
	l, err := el.CampaignEtcd(ctx)
	require.NoError(t, err)
	require.NoError(t, l.Resign(ctx))
	require.ErrorIs(t, st.Fence(ctx, l), versiongate.ErrLeadershipLost)
	require.ErrorIs(t, st.WriteStatus(ctx, l, []byte("late"), 0), versiongate.ErrLeadershipLost)
	fence, err := cli.Get(ctx, testStatusKey+".fence")
	require.NoError(t, err)
	require.Empty(t, fence.Kvs)
}
