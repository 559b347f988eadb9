package etcdstore_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reconkit/reconkit/election/electiontest"
	"github.com/reconkit/reconkit/internal/testenv"
	"github.com/reconkit/reconkit/versiongate"
	"github.com/reconkit/reconkit/versiongate/etcdstore"
	"github.com/reconkit/reconkit/versiongate/versiongatetest"
)

// The etcd store passes the store conformance suite on a real etcd, each
// case under a prefix of its own.
func TestEtcdStoreConformance(t *testing.T) {
	e := testenv.Etcd(t)
	cli := e.Client(t)
	var n atomic.Int64
	versiongatetest.RunStoreConformance(t, versiongatetest.StoreHarness{
		New: func(t *testing.T) func() versiongate.Store {
			p := fmt.Sprintf("/conformance/%d", n.Add(1))
			st, err := etcdstore.New(cli, etcdstore.Config{StatusKey: p + "/status", NodesPrefix: p + "/nodes/"})
			require.NoError(t, err)
			return func() versiongate.Store { return st }
		},
	})
}

// On etcd, a gate whose election has no etcd guard (here the in-memory
// election; a Kubernetes Lease term is the same case) is fenced by its
// token: once a later term fenced the store, the leader's restricted
// status write is refused by etcd at apply time, though its own term
// context is still live.
func TestEtcdStoreFencesTokenTermsThroughTheGate(t *testing.T) {
	e := testenv.Etcd(t)
	cli := e.Client(t)
	ctx := context.Background()
	cfg := etcdstore.Config{StatusKey: "/tok/status", NodesPrefix: "/tok/nodes/"}
	st, err := etcdstore.New(cli, cfg)
	require.NoError(t, err)
	before := versiongate.Status{State: versiongate.StateDone, Version: versiongate.Version{Release: versiongate.Release{Major: 1}},
		MinimumCompatibleRelease: versiongate.Release{Major: 1}}
	b, err := before.Encode()
	require.NoError(t, err)
	_, err = cli.Put(ctx, cfg.StatusKey, string(b))
	require.NoError(t, err)
	old, err := versiongate.EncodeNodeRelease("old", versiongate.Version{Release: versiongate.Release{Major: 1}})
	require.NoError(t, err)
	_, err = cli.Put(ctx, cfg.NodesPrefix+"old", string(old))
	require.NoError(t, err)

	rec := &reconcileRecorder{}
	g, err := versiongate.New(versiongate.Config{
		Store: st, NodeID: "new", Version: versiongate.Version{Release: versiongate.Release{Major: 2}},
		MinimumCompatibleRelease: versiongate.Release{Major: 2},
		Candidate:                electiontest.NewElection().NewCandidate("new"),
		Reconcile:                rec.reconcile, SettleTime: -1,
	})
	require.NoError(t, err)
	rctx, cancel := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() { errc <- g.Run(rctx) }()
	defer func() { cancel(); require.NoError(t, <-errc) }()
	require.NoError(t, versiongatetest.WaitPhase(ctx, g, versiongate.PhaseRestricting))
	require.NoError(t, versiongatetest.WaitBlocking(ctx, g, "old"))
	fence, err := cli.Get(ctx, cfg.StatusKey+".fence")
	require.NoError(t, err)
	require.Len(t, fence.Kvs, 1, "the leader fenced the store")

	require.NoError(t, st.Fence(ctx, versiongatetest.NewTerm("successor", 100)))
	require.True(t, g.Leading())
	_, err = cli.Delete(ctx, cfg.NodesPrefix+"old")
	require.NoError(t, err)
	require.NoError(t, versiongatetest.WaitLeading(ctx, g, false))
	resp, err := cli.Get(ctx, cfg.StatusKey)
	require.NoError(t, err)
	require.Equal(t, string(b), string(resp.Kvs[0].Value), "the deposed leader's write reached etcd")
	require.Empty(t, rec.calls())
}

// A fence ahead of a term names the fence key, the stored token, the
// term's token, and how to clear the key.
func TestFencedOffErrorNamesTheKey(t *testing.T) {
	e := testenv.Etcd(t)
	cli := e.Client(t)
	ctx := context.Background()
	st, err := etcdstore.New(cli, etcdstore.Config{StatusKey: "/fo/status", NodesPrefix: "/fo/nodes/"})
	require.NoError(t, err)
	require.NoError(t, st.Fence(ctx, versiongatetest.NewTerm("restored", 40)))
	err = st.Fence(ctx, versiongatetest.NewTerm("new", 3))
	var fe *versiongate.FencedOffError
	require.ErrorAs(t, err, &fe)
	require.Equal(t, versiongate.FencedOffError{Fence: `the fence key "/fo/status.fence"`, Stored: 40, Token: 3,
		Clear: "delete the key (etcdctl del /fo/status.fence, with the store client's namespace prefix if it has one), and the next term fences the store anew"}, *fe)
	require.ErrorIs(t, err, versiongate.ErrLeadershipLost)
	require.Contains(t, err.Error(), `the fence key "/fo/status.fence" holds token 40, above this term's token 3`)
}
