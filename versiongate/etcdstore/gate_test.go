package etcdstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/reconkit/reconkit/versiongate"
	"github.com/reconkit/reconkit/versiongate/etcdstore"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	clocktesting "k8s.io/utils/clock/testing"
)

func TestWaitReady(t *testing.T) {
	_, cli := etcdClient(t)
	ctx := testContext(t)
	for _, tc := range []struct {
		name   string
		status *versiongate.Status
		raw    string
		ready  bool
	}{
		{name: "absent"},
		{name: "corrupt", raw: "not a status"},
		{name: "too old", status: &versiongate.Status{State: versiongate.StateDone, Version: ver(t, "0.9.0"), MinimumCompatibleRelease: rel(t, "0.9.0")}},
		{name: "too new", status: &versiongate.Status{State: versiongate.StateDone, Version: ver(t, "2.0.0"), MinimumCompatibleRelease: rel(t, "1.5.0")}},
		{name: "equal", status: &versiongate.Status{State: versiongate.StateDone, Version: ver(t, "1.2.0"), MinimumCompatibleRelease: rel(t, "1.0.0")}, ready: true},
		{name: "working", status: &versiongate.Status{State: versiongate.StateWorking, Version: ver(t, "1.1.0"), MinimumCompatibleRelease: rel(t, "1.2.0")}, ready: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := cli.Delete(ctx, testStatusKey)
			require.NoError(t, err)
			if tc.status != nil {
				putStatus(t, cli, *tc.status)
			}
			if tc.raw != "" {
				_, err := cli.Put(ctx, testStatusKey, tc.raw)
				require.NoError(t, err)
			}
			g, _ := newGate(t, cli, gateOpts{id: "n1", version: "1.2.0", minReconciler: "1.0.0"})
			errc := waitReady(t, ctx, g)
			if tc.ready {
				require.NoError(t, <-errc)
				return
			}
			// Not ready now; becomes ready once a suitable status appears.
			wctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
			require.ErrorIs(t, g.WaitReady(wctx), context.DeadlineExceeded)
			cancel()
			if tc.raw != "" {
				require.ErrorIs(t, g.StatusError(), versiongate.ErrCorruptStatus)
			}
			putStatus(t, cli, versiongate.Status{State: versiongate.StateDone, Version: ver(t, "1.2.0"), MinimumCompatibleRelease: rel(t, "1.0.0")})
			select {
			case err := <-errc:
				require.NoError(t, err)
			case <-time.After(20 * time.Second):
				t.Fatal("WaitReady did not return after a compatible status was written")
			}
			require.NoError(t, g.StatusError())
		})
	}
}

func TestLeaderStatusAbsent(t *testing.T) {
	_, cli := etcdClient(t)
	ctx := testContext(t)
	clk := clocktesting.NewFakeClock(time.Now())
	rec := &reconcileRecorder{fail: 2}
	putRegistry(t, cli, "n1", "1.0.0")
	g, _ := newGate(t, cli, gateOpts{id: "n1", version: "1.0.0+abc", minCompat: "1.0.0", clock: clk, rec: rec})
	runGate(t, ctx, g)
	ready := waitReady(t, ctx, g)

	// Two failed attempts of the initial reconcile wait for backoff on the
	// fake clock; there is no settle wait since no reconciler ran before.
	stepWhenWaiting(t, clk, time.Second)
	stepWhenWaiting(t, clk, time.Second)
	eventually(t, func() bool { return len(rec.calls()) == 1 }, "initial reconcile")
	require.NoError(t, recv(t, ready, "WaitReady"))
	st, _, ok := getStatus(t, cli)
	require.True(t, ok)
	require.Equal(t, versiongate.Status{State: versiongate.StateDone, Version: ver(t, "1.0.0+abc"), MinimumCompatibleRelease: rel(t, "1.0.0")}, st)
	// The status is written before the phase moves on: WaitReady can
	// return first.
	waitPhase(t, g, versiongate.PhaseDone)
	require.True(t, g.Leading())
	require.NotZero(t, rec.calls()[0], "reconcile receives the term's token")

	// Periodic reconcile after the default interval, on the fake clock.
	stepWhenWaiting(t, clk, versiongate.DefaultReconcileInterval)
	eventually(t, func() bool { return len(rec.calls()) == 2 }, "periodic reconcile")
}

func TestLeaderStatusEqual(t *testing.T) {
	_, cli := etcdClient(t)
	ctx := testContext(t)
	clk := clocktesting.NewFakeClock(time.Now())
	rec := &reconcileRecorder{}
	putRegistry(t, cli, "n1", "1.0.0")
	putStatus(t, cli, versiongate.Status{State: versiongate.StateDone, Version: ver(t, "1.0.0"), MinimumCompatibleRelease: rel(t, "1.0.0")})
	_, rev0, _ := getStatus(t, cli)
	g, _ := newGate(t, cli, gateOpts{id: "n1", version: "1.0.0", minCompat: "1.0.0", clock: clk, rec: rec})
	runGate(t, ctx, g)

	waitPhase(t, g, versiongate.PhaseSettling)
	require.Empty(t, rec.calls(), "no reconcile before the settle time passed")
	stepWhenWaiting(t, clk, versiongate.DefaultSettleTime)
	waitPhase(t, g, versiongate.PhaseDone)
	require.Len(t, rec.calls(), 1)
	_, rev1, _ := getStatus(t, cli)
	require.Equal(t, rev0, rev1, "an up-to-date status is left alone")
}

func TestLeaderStatusCompatibleSetsWorking(t *testing.T) {
	_, cli := etcdClient(t)
	ctx := testContext(t)
	clk := clocktesting.NewFakeClock(time.Now())
	rec := &reconcileRecorder{}
	putRegistry(t, cli, "n1", "1.1.0")
	putRegistry(t, cli, "old", "1.0.0")
	putStatus(t, cli, versiongate.Status{State: versiongate.StateDone, Version: ver(t, "1.0.0"), MinimumCompatibleRelease: rel(t, "1.0.0")})
	g, _ := newGate(t, cli, gateOpts{id: "n1", version: "1.1.0", minCompat: "1.0.0", clock: clk, rec: rec})
	runGate(t, ctx, g)

	waitPhase(t, g, versiongate.PhaseSettling)
	st, _, _ := getStatus(t, cli)
	require.Equal(t, versiongate.Status{State: versiongate.StateWorking, Version: ver(t, "1.0.0"), MinimumCompatibleRelease: rel(t, "1.0.0")}, st)
	require.Empty(t, g.Blocking(), "1.0.0 nodes are compatible with 1.1.0's state")
	stepWhenWaiting(t, clk, versiongate.DefaultSettleTime)
	waitPhase(t, g, versiongate.PhaseDone)
	st, _, _ = getStatus(t, cli)
	require.Equal(t, versiongate.Status{State: versiongate.StateDone, Version: ver(t, "1.1.0"), MinimumCompatibleRelease: rel(t, "1.0.0")}, st)
}

func TestReleaseTracking(t *testing.T) {
	_, cli := etcdClient(t)
	ctx := testContext(t)
	clk := clocktesting.NewFakeClock(time.Now())
	putRegistry(t, cli, "a", "1.1.0")
	putRegistry(t, cli, "w", "0.5.0", "worker") // not a member
	_, err := cli.Put(ctx, testNodesPrefix+"junk", "{not json")
	require.NoError(t, err)
	g, _ := newGate(t, cli, gateOpts{id: "a", version: "1.1.0", minCompat: "1.0.0", clock: clk})
	runGate(t, ctx, g)

	want := func(min, max string, nodes int, blocking string) {
		t.Helper()
		eventually(t, func() bool {
			r, ok := g.Releases()
			return ok && r.Min == rel(t, min) && r.Max == rel(t, max) && r.Nodes == nodes && nodeIDs(g.Blocking()) == blocking
		}, "want min %s max %s nodes %d blocking %q; have %+v %q", min, max, nodes, blocking, fmtReleases(g), nodeIDs(g.Blocking()))
	}
	// A record that does not decode counts as a node of unknown release,
	// which blocks, until it goes (TestEmptyRecordIsNoDeletion).
	want("0.0.0", "1.1.0", 2, "junk@unknown")
	_, err = cli.Delete(ctx, testNodesPrefix+"junk")
	require.NoError(t, err)
	want("1.1.0", "1.1.0", 1, "")

	putRegistry(t, cli, "b", "0.9.0")
	want("0.9.0", "1.1.0", 2, "b@0.9.0")

	// Role change: the worker becomes a controller, then b stops being one.
	putRegistry(t, cli, "w", "0.5.0", "worker", "controller")
	want("0.5.0", "1.1.0", 3, "b@0.9.0,w@0.5.0")
	putRegistry(t, cli, "b", "0.9.0", "worker")
	want("0.5.0", "1.1.0", 2, "w@0.5.0")

	// Upgrade and delete.
	putRegistry(t, cli, "w", "1.2.0", "controller")
	want("1.1.0", "1.2.0", 2, "")
	del, err := cli.Delete(ctx, testNodesPrefix+"w")
	require.NoError(t, err)
	want("1.1.0", "1.1.0", 1, "")
	r, _ := g.Releases()
	require.Equal(t, del.Header.Revision, r.Revision, "the summary's revision is the last node change")
}

func fmtReleases(g *versiongate.Gate) versiongate.Releases { r, _ := g.Releases(); return r }

func TestNoReconcileWhileIncompatibleNodeExists(t *testing.T) {
	_, cli := etcdClient(t)
	ctx := testContext(t)
	clk := clocktesting.NewFakeClock(time.Now())
	rec := &reconcileRecorder{}
	putRegistry(t, cli, "new", "2.0.0")
	putRegistry(t, cli, "old", "1.0.0")
	before := versiongate.Status{State: versiongate.StateDone, Version: ver(t, "1.0.0"), MinimumCompatibleRelease: rel(t, "1.0.0")}
	putStatus(t, cli, before)
	g, _ := newGate(t, cli, gateOpts{id: "new", version: "2.0.0", minCompat: "2.0.0", clock: clk, rec: rec})
	runGate(t, ctx, g)

	waitPhase(t, g, versiongate.PhaseRestricting)
	require.Equal(t, []versiongate.Node{{ID: "old", Release: rel(t, "1.0.0")}}, g.Blocking())
	// Nothing moves while the old node exists, however much time passes.
	clk.Step(time.Hour)
	st, _, _ := getStatus(t, cli)
	require.Equal(t, before, st)
	require.Empty(t, rec.calls())
	require.Equal(t, versiongate.PhaseRestricting, g.Phase())

	putRegistry(t, cli, "old", "2.0.0") // upgraded
	waitPhase(t, g, versiongate.PhaseSettling)
	st, _, _ = getStatus(t, cli)
	require.Equal(t, versiongate.Status{State: versiongate.StateWorking, Version: ver(t, "1.0.0"), MinimumCompatibleRelease: rel(t, "2.0.0")}, st,
		"the intersection of both statuses")
	require.Empty(t, rec.calls())
	stepWhenWaiting(t, clk, versiongate.DefaultSettleTime)
	waitPhase(t, g, versiongate.PhaseDone)
	st, _, _ = getStatus(t, cli)
	require.Equal(t, versiongate.Status{State: versiongate.StateDone, Version: ver(t, "2.0.0"), MinimumCompatibleRelease: rel(t, "2.0.0")}, st)
}

// hookKV calls before ahead of every transaction commit, and the function
// before returned, if any, after the commit returned.
type hookKV struct {
	clientv3.KV
	before func() (after func())
}

func (k *hookKV) Txn(ctx context.Context) clientv3.Txn {
	return &hookTxn{Txn: k.KV.Txn(ctx), before: k.before}
}

type hookTxn struct {
	clientv3.Txn
	before func() (after func())
}

func (t *hookTxn) If(cs ...clientv3.Cmp) clientv3.Txn   { t.Txn = t.Txn.If(cs...); return t }
func (t *hookTxn) Then(ops ...clientv3.Op) clientv3.Txn { t.Txn = t.Txn.Then(ops...); return t }
func (t *hookTxn) Else(ops ...clientv3.Op) clientv3.Txn { t.Txn = t.Txn.Else(ops...); return t }
func (t *hookTxn) Commit() (*clientv3.TxnResponse, error) {
	if after := t.before(); after != nil {
		defer after()
	}
	return t.Txn.Commit()
}

func TestRestrictAbortedByConcurrentNodeChange(t *testing.T) {
	e, cli := etcdClient(t)
	ctx := testContext(t)
	clk := clocktesting.NewFakeClock(time.Now())
	putRegistry(t, cli, "new", "2.0.0")
	before := versiongate.Status{State: versiongate.StateDone, Version: ver(t, "1.0.0"), MinimumCompatibleRelease: rel(t, "1.0.0")}
	putStatus(t, cli, before)

	gateCli := e.Client(t)
	var g *versiongate.Gate
	var injected bool
	committed := make(chan struct{})
	// Right before the restricted status is committed, an old node joins:
	// the summary the leader acted on is stale, and the write must fail.
	gateCli.KV = &hookKV{KV: gateCli.KV, before: func() func() {
		if !injected && g.Phase() == versiongate.PhaseRestricting {
			injected = true
			putRegistry(t, cli, "late", "1.0.0")
			return func() { close(committed) }
		}
		return nil
	}}
	g, _ = newGate(t, gateCli, gateOpts{id: "new", version: "2.0.0", minCompat: "2.0.0", clock: clk})
	runGate(t, ctx, g)

	select {
	case <-committed: // judge only once the stale write was answered
	case <-time.After(time.Minute):
		t.Fatal("the restricted status write was never attempted")
	}
	eventually(t, func() bool { return nodeIDs(g.Blocking()) == "late@1.0.0" }, "late node seen")
	require.Equal(t, versiongate.PhaseRestricting, g.Phase())
	st, _, _ := getStatus(t, cli)
	require.Equal(t, before, st, "the restricted status was not written past the new node")

	_, err := cli.Delete(ctx, testNodesPrefix+"late")
	require.NoError(t, err)
	waitPhase(t, g, versiongate.PhaseSettling)
	st, _, _ = getStatus(t, cli)
	require.Equal(t, rel(t, "2.0.0"), st.MinimumCompatibleRelease)
}

func TestCorruptStatus(t *testing.T) {
	_, cli := etcdClient(t)
	ctx := testContext(t)
	clk := clocktesting.NewFakeClock(time.Now())
	rec := &reconcileRecorder{}
	_, err := cli.Put(ctx, testStatusKey, "\x08\x02garbage")
	require.NoError(t, err)
	putRegistry(t, cli, "n1", "1.0.0")
	g, _ := newGate(t, cli, gateOpts{id: "n1", version: "1.0.0", clock: clk, rec: rec})
	ready := waitReady(t, ctx, g)
	runGate(t, ctx, g)

	// Treated as absent, but a reconciler evidently ran: settle first.
	waitPhase(t, g, versiongate.PhaseSettling)
	require.ErrorIs(t, g.StatusError(), versiongate.ErrCorruptStatus)
	stepWhenWaiting(t, clk, versiongate.DefaultSettleTime)
	require.NoError(t, recv(t, ready, "WaitReady"))
	st, _, _ := getStatus(t, cli)
	require.Equal(t, versiongate.Status{State: versiongate.StateDone, Version: ver(t, "1.0.0")}, st)
	require.Len(t, rec.calls(), 1)
}

func TestLeaderHandover(t *testing.T) {
	_, cli := etcdClient(t)
	ctx := testContext(t)
	clk := clocktesting.NewFakeClock(time.Now())
	putRegistry(t, cli, "a", "1.0.0")
	putRegistry(t, cli, "b", "1.0.0")
	recA, recB := &reconcileRecorder{}, &reconcileRecorder{}
	ga, _ := newGate(t, cli, gateOpts{id: "a", version: "1.0.0", clock: clk, rec: recA})
	gb, _ := newGate(t, cli, gateOpts{id: "b", version: "1.0.0", clock: clk, rec: recB})
	stopA := runGate(t, ctx, ga)
	waitPhase(t, ga, versiongate.PhaseDone)
	stopB := runGate(t, ctx, gb)
	waitPhase(t, gb, versiongate.PhaseCampaigning)
	require.False(t, gb.Leading())

	require.NoError(t, stopA())
	waitPhase(t, gb, versiongate.PhaseSettling)
	require.Empty(t, recB.calls())
	stepWhenWaiting(t, clk, versiongate.DefaultSettleTime)
	waitPhase(t, gb, versiongate.PhaseDone)
	require.Greater(t, recB.calls()[0], recA.calls()[0], "fencing tokens increase across terms")

	// A newer node takes over; b stops campaigning and resigns.
	putRegistry(t, cli, "c", "1.1.0")
	eventually(t, func() bool { return gb.Phase() == versiongate.PhaseIdle && !gb.Leading() }, "b steps down")
	require.NoError(t, stopB())
}

func TestPublishedRecord(t *testing.T) {
	_, cli := etcdClient(t)
	ctx := testContext(t)
	clk := clocktesting.NewFakeClock(time.Now())
	g, _ := newGate(t, cli, gateOpts{id: "p1", version: "1.0.0", owned: true, clock: clk})
	other, _ := newGate(t, cli, gateOpts{id: "p2", version: "1.0.0", owned: true, clock: clk})
	gctx, cancel := context.WithCancel(ctx)
	errc := make(chan error, 1)
	go func() { errc <- g.Run(gctx) }()
	t.Cleanup(func() {
		cancel()
		if errc != nil {
			recv(t, errc, "Run's return")
		}
	})
	stopOther := runGate(t, ctx, other)
	require.NoError(t, recv(t, waitReady(t, ctx, g), "WaitReady"))
	eventually(t, func() bool { r, _ := g.Releases(); return r.Nodes == 2 }, "both records counted")

	resp, err := cli.Get(ctx, testNodesPrefix+"p1")
	require.NoError(t, err)
	require.Len(t, resp.Kvs, 1)
	require.NotZero(t, resp.Kvs[0].Lease, "the record is bound to a lease")
	id, v, err := versiongate.DecodeNodeRelease(resp.Kvs[0].Value)
	require.NoError(t, err)
	require.Equal(t, "p1", id)
	require.Equal(t, ver(t, "1.0.0"), v)

	// A clean stop removes the record at once.
	require.NoError(t, stopOther())
	eventually(t, func() bool { r, _ := g.Releases(); return r.Nodes == 1 }, "stopped node's record gone")

	// A lost lease ends Run with ErrRecordLost.
	_, err = cli.Revoke(ctx, clientv3.LeaseID(resp.Kvs[0].Lease))
	require.NoError(t, err)
	select {
	case err := <-errc:
		errc = nil
		require.ErrorIs(t, err, versiongate.ErrRecordLost)
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return after its record's lease was revoked")
	}
}

// On etcd, a term with an etcd guard is fenced by the guard in the write's
// transaction: once its key is gone, its writes are refused, though no
// fence key was ever written.
func TestEtcdStoreGuardTerms(t *testing.T) {
	_, cli := etcdClient(t)
	ctx := testContext(t)
	st := etcdStore(t, cli)
	cand := &testCandidate{cli: cli, id: "a"}
	term, err := cand.Campaign(ctx)
	require.NoError(t, err)
	_, guarded := term.(etcdstore.Guard)
	require.True(t, guarded)
	require.NoError(t, st.Fence(ctx, term))
	require.NoError(t, st.WriteStatus(ctx, term, []byte("by a"), 0))
	fence, err := cli.Get(ctx, testStatusKey+".fence")
	require.NoError(t, err)
	require.Empty(t, fence.Kvs, "a guarded term needs no fence key")

	// The candidate key goes (its lease is revoked elsewhere); the term's own
	// context may not have noticed yet, the guard has.
	_, err = cli.Revoke(ctx, term.(*testTerm).sess.Lease())
	require.NoError(t, err)
	require.ErrorIs(t, st.WriteStatus(ctx, term, []byte("late by a"), 0), versiongate.ErrLeadershipLost)
	require.ErrorIs(t, st.Fence(ctx, term), versiongate.ErrLeadershipLost)
	resp, err := cli.Get(ctx, testStatusKey)
	require.NoError(t, err)
	require.Equal(t, "by a", string(resp.Kvs[0].Value))
	_ = term.Resign(ctx)
}
