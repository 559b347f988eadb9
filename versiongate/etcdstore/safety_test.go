package etcdstore_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/reconkit/reconkit/election"
	"github.com/reconkit/reconkit/election/etcd"
	"github.com/reconkit/reconkit/internal/testenv"
	"github.com/reconkit/reconkit/versiongate"
)

// etcdCandidate wires a gate to reconkit's etcd election the way hosts do,
// and remembers the newest term so the test can judge it from the holder's
// own view.
type etcdCandidate struct {
	e    *etcd.Elector
	mu   sync.Mutex
	term *etcd.Leadership
}

func newEtcdCandidate(t *testing.T, cli *clientv3.Client, id string) *etcdCandidate {
	t.Helper()
	e, err := etcd.New(etcd.Config{Client: cli, Prefix: testElection, Identity: id})
	require.NoError(t, err)
	t.Cleanup(func() { _ = e.Close() })
	return &etcdCandidate{e: e}
}

func (c *etcdCandidate) candidate() versiongate.Candidate {
	return versiongate.CandidateOf(func(ctx context.Context) (*etcd.Leadership, error) {
		l, err := c.e.CampaignEtcd(ctx)
		if err == nil {
			c.mu.Lock()
			c.term = l
			c.mu.Unlock()
		}
		return l, err
	})
}

func (c *etcdCandidate) current() *etcd.Leadership {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.term
}

// The one vocabulary: an etcd election term is a Term as it is, and the
// leadership-lost sentinels of both packages are one value.
var _ versiongate.Term = (*etcd.Leadership)(nil)

func TestOneLeadershipLostSentinel(t *testing.T) {
	err := fmt.Errorf("status not written: %w", versiongate.ErrLeadershipLost)
	require.ErrorIs(t, err, election.ErrLeadershipLost)
	require.ErrorIs(t, fmt.Errorf("x: %w", election.ErrLeadershipLost), versiongate.ErrLeadershipLost)
}

// When a newer release joins while the leader's reconcile runs, the gate
// stops leading: the reconcile's context ends, but the term (and so the
// etcd key that makes everybody else wait) is held until the reconcile has
// returned. A successor's reconcile never overlaps it. On first bring-up
// there is no status yet, so no SettleTime hides an overlap.
func TestNewerReleaseDoesNotReleaseWhileReconcileRuns(t *testing.T) {
	_, cli := etcdClient(t)
	ctx := testContext(t)
	putRegistry(t, cli, "a", "1.0.0")

	ca, cb := newEtcdCandidate(t, cli, "a"), newEtcdCandidate(t, cli, "b")
	var aInside, bStarted atomic.Int32
	var mu sync.Mutex
	var failures []string
	fail := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		failures = append(failures, fmt.Sprintf(format, args...))
	}
	aEnded := make(chan struct{})
	var endOnce sync.Once
	reconcileA := func(rctx context.Context, _ versiongate.Term) error {
		aInside.Add(1)
		defer aInside.Add(-1)
		<-rctx.Done()
		// Judge from the holder's own view: the term is still live and its
		// key still exists in etcd, so nobody else can lead yet.
		l := ca.current()
		if err := l.Context().Err(); err != nil {
			fail("a's term ended (%v) while its reconcile still ran", context.Cause(l.Context()))
		}
		resp, err := cli.Get(context.WithoutCancel(rctx), l.Key())
		switch {
		case err != nil:
			fail("get a's key: %v", err)
		case len(resp.Kvs) == 0 || resp.Kvs[0].CreateRevision != int64(l.Token()):
			fail("a's key was released while its reconcile still ran")
		}
		if bStarted.Load() != 0 {
			fail("b reconciled while a's reconcile still ran")
		}
		endOnce.Do(func() { close(aEnded) })
		return rctx.Err()
	}
	reconcileB := func(context.Context, versiongate.Term) error {
		bStarted.Add(1)
		if aInside.Load() != 0 {
			fail("b reconciles while a's reconcile runs")
		}
		return nil
	}
	ga, err := versiongate.New(versiongate.Config{
		Store: etcdStore(t, cli), NodeID: "a", Version: ver(t, "1.0.0"),
		Decode:    decodeRegistry,
		Candidate: ca.candidate(), Reconcile: reconcileA,
	})
	require.NoError(t, err)
	gb, err := versiongate.New(versiongate.Config{
		Store: etcdStore(t, cli), NodeID: "b", Version: ver(t, "1.1.0"),
		Decode:    decodeRegistry,
		Candidate: cb.candidate(), Reconcile: reconcileB,
	})
	require.NoError(t, err)
	runGate(t, ctx, ga)
	eventually(t, func() bool { return aInside.Load() == 1 }, "a reconciles")
	require.True(t, ga.Leading())

	runGate(t, ctx, gb)
	putRegistry(t, cli, "b", "1.1.0")
	select {
	case <-aEnded:
	case <-time.After(30 * time.Second):
		t.Fatal("a's reconcile context did not end after a newer release joined")
	}
	eventually(t, func() bool { return bStarted.Load() > 0 }, "b takes over and reconciles")
	waitLeading(t, ga, false)
	mu.Lock()
	defer mu.Unlock()
	require.Empty(t, failures)
}

// A second process with the same NodeID does not take the record: it waits
// until the first one's record is gone, and only then publishes its own.
func TestSecondProcessWithSameNodeIDDoesNotTakeRecord(t *testing.T) {
	_, cli := etcdClient(t)
	ctx := testContext(t)
	first, _ := newGate(t, cli, gateOpts{id: "n1", version: "1.0.0", owned: true})
	second, _ := newGate(t, cli, gateOpts{id: "n1", version: "1.0.0", owned: true})
	stopFirst := runGate(t, ctx, first)
	require.NoError(t, recv(t, waitReadyAfterStatus(t, ctx, cli, first), "WaitReady"))
	resp, err := cli.Get(ctx, testNodesPrefix+"n1")
	require.NoError(t, err)
	require.Len(t, resp.Kvs, 1)
	lease := resp.Kvs[0].Lease

	// The second process's publication attempt is refused while the
	// first's record exists.
	value, err := versiongate.EncodeNodeRelease("n1", ver(t, "1.0.0"))
	require.NoError(t, err)
	_, err = etcdStore(t, cli).PublishRecord(ctx, "n1", value, versiongate.DefaultRecordTTL)
	require.ErrorIs(t, err, versiongate.ErrRecordHeld)
	resp, err = cli.Get(ctx, testNodesPrefix+"n1")
	require.NoError(t, err)
	require.Len(t, resp.Kvs, 1)
	require.Equal(t, lease, resp.Kvs[0].Lease, "the second process took the record")
	require.True(t, first.Ready())

	runGate(t, ctx, second)
	secondReady := waitReady(t, ctx, second)
	// Once the first stops (revoking its record), the second publishes.
	require.NoError(t, stopFirst())
	require.False(t, first.Ready())
	select {
	case err := <-secondReady:
		require.NoError(t, err)
	case <-time.After(60 * time.Second):
		t.Fatal("the second process never published after the first stopped")
	}
	resp, err = cli.Get(ctx, testNodesPrefix+"n1")
	require.NoError(t, err)
	require.Len(t, resp.Kvs, 1)
	require.NotEqual(t, lease, resp.Kvs[0].Lease)
}

// waitReadyAfterStatus writes a status that admits everything, then waits.
func waitReadyAfterStatus(t *testing.T, ctx context.Context, cli *clientv3.Client, g *versiongate.Gate) <-chan error {
	t.Helper()
	putStatus(t, cli, versiongate.Status{State: versiongate.StateDone, Version: ver(t, "1.0.0"), MinimumCompatibleRelease: rel(t, "0.0.0")})
	return waitReady(t, ctx, g)
}

// After ErrRecordLost the same gate can run again; WaitReady ends with
// ErrRecordLost when the record is lost while it waits.
func TestRecordLostWhileWaitingAndRunAgain(t *testing.T) {
	_, cli := etcdClient(t)
	ctx := testContext(t)
	g, _ := newGate(t, cli, gateOpts{id: "r1", version: "1.0.0", owned: true, minReconciler: "9.0.0"})
	errc := make(chan error, 1)
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { errc <- g.Run(rctx) }()
	ready := waitReady(t, ctx, g) // blocks: no status admits this node
	var lease int64
	eventually(t, func() bool {
		resp, err := cli.Get(ctx, testNodesPrefix+"r1")
		if err != nil || len(resp.Kvs) == 0 {
			return false
		}
		lease = resp.Kvs[0].Lease
		return true
	}, "record published")
	_, err := cli.Revoke(ctx, clientv3.LeaseID(lease))
	require.NoError(t, err)
	select {
	case err := <-ready:
		require.ErrorIs(t, err, versiongate.ErrRecordLost, "WaitReady must end when the record is lost")
	case <-time.After(30 * time.Second):
		t.Fatal("WaitReady did not end after the record was lost")
	}
	select {
	case err := <-errc:
		require.ErrorIs(t, err, versiongate.ErrRecordLost)
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return after the record was lost")
	}
	require.False(t, g.Ready())

	// Run again on the same gate: the record is published anew. A node of
	// release 9.0.0 is known first, so that this gate does not lead: a
	// leader at 1.0.0 would write its own status over the admitting one
	// (a rollback, as designed), and this node, needing a 9.0.0
	// reconciler, would then wait for ever.
	value, err := versiongate.EncodeNodeRelease("newer", ver(t, "9.0.0"))
	require.NoError(t, err)
	_, err = cli.Put(ctx, testNodesPrefix+"newer", string(value))
	require.NoError(t, err)
	putStatus(t, cli, versiongate.Status{State: versiongate.StateDone, Version: ver(t, "9.0.0"), MinimumCompatibleRelease: rel(t, "0.0.0")})
	stop := runGate(t, ctx, g)
	require.NoError(t, recv(t, waitReady(t, ctx, g), "WaitReady under a status that admits this node"))
	require.False(t, g.Leading(), "a gate below the newest release led")
	require.True(t, g.Ready())
	require.NoError(t, stop())
	require.False(t, g.Ready())
}

// A node cut off from etcd (a partition, not a crash) stops serving before
// the server expires its record, and so before the leader that waits for
// the node to go can reconcile state that breaks it. Default RecordTTL and
// SettleTime; the window between the old node's stop and the server's
// expiry is measured and logged.
func TestCutOffNodeStopsServingBeforeLeaderReconciles(t *testing.T) {
	e, cli := etcdClient(t)
	ctx := testContext(t)
	proxy := testenv.Proxy(t, e.Members[0].ClientAddr())
	oldCli := testenv.NewEtcdClient(t, proxy.Addr())

	putStatus(t, cli, versiongate.Status{State: versiongate.StateDone, Version: ver(t, "1.0.0"), MinimumCompatibleRelease: rel(t, "1.0.0")})
	oldGate, err := versiongate.New(versiongate.Config{
		Store: etcdStore(t, oldCli), NodeID: "old", Version: ver(t, "1.0.0"),
		MinimumReconcilerRelease: rel(t, "1.0.0"), MinimumCompatibleRelease: rel(t, "1.0.0"),
		Candidate: newEtcdCandidate(t, oldCli, "old").candidate(),
		Reconcile: func(context.Context, versiongate.Term) error { return nil },
	})
	require.NoError(t, err)
	var leaderReconciled atomic.Int64 // unix nanos of the new leader's first reconcile
	newG, err := versiongate.New(versiongate.Config{
		Store: etcdStore(t, cli), NodeID: "new", Version: ver(t, "1.1.0"),
		MinimumReconcilerRelease: rel(t, "1.0.0"), MinimumCompatibleRelease: rel(t, "1.1.0"),
		Candidate: newEtcdCandidate(t, cli, "new").candidate(),
		Reconcile: func(context.Context, versiongate.Term) error {
			leaderReconciled.CompareAndSwap(0, time.Now().UnixNano())
			return nil
		},
	})
	require.NoError(t, err)

	oldErr := make(chan error, 1)
	octx, ocancel := context.WithCancel(ctx)
	defer ocancel()
	go func() { oldErr <- oldGate.Run(octx) }()
	require.NoError(t, recv(t, waitReady(t, ctx, oldGate), "WaitReady"))
	require.True(t, oldGate.Ready())
	runGate(t, ctx, newG)
	waitPhase(t, newG, versiongate.PhaseRestricting)

	// Watch the old node's record from the server's side.
	deleted := make(chan time.Time, 1)
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	resp, err := cli.Get(ctx, testNodesPrefix+"old")
	require.NoError(t, err)
	require.Len(t, resp.Kvs, 1)
	wch := cli.Watch(wctx, testNodesPrefix+"old", clientv3.WithRev(resp.Header.Revision+1))
	go func() {
		for wr := range wch {
			for _, ev := range wr.Events {
				if ev.Type == clientv3.EventTypeDelete {
					deleted <- time.Now()
					return
				}
			}
		}
	}()

	cut := time.Now()
	proxy.Cut()
	var stopped time.Time
	select {
	case err := <-oldErr:
		stopped = time.Now()
		require.ErrorIs(t, err, versiongate.ErrRecordLost)
	case <-time.After(60 * time.Second):
		t.Fatal("the cut-off node never learned that its record was lost")
	}
	require.False(t, oldGate.Ready(), "a cut-off node must stop reporting ready")
	var expired time.Time
	select {
	case expired = <-deleted:
	case <-time.After(60 * time.Second):
		t.Fatal("the server never expired the cut-off node's record")
	}
	eventually(t, func() bool { return leaderReconciled.Load() != 0 }, "the new leader reconciles")
	reconciled := time.Unix(0, leaderReconciled.Load())
	t.Logf("cut → old node stops serving %v; → server expires its record %v (old node stopped %v before); → new leader reconciles %v",
		stopped.Sub(cut), expired.Sub(cut), expired.Sub(stopped), reconciled.Sub(cut))
	require.True(t, stopped.Before(expired), "the old node stopped serving after the server expired its record")
	require.True(t, stopped.Before(reconciled), "the old node still served when the new leader reconciled")
	proxy.Restore()
}
