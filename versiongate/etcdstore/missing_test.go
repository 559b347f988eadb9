package etcdstore_test

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/reconkit/reconkit/versiongate"
)

// On etcd, a status deleted while an old node that passed WaitReady on it
// still has its record: the leader warns, reconciles nothing and writes
// nothing while the old node is there, however long, and goes on once it
// is gone.
func TestLeaderStatusDeletedWhileOldNodeServes(t *testing.T) {
	_, cli := etcdClient(t)
	ctx := testContext(t)
	clk := clocktesting.NewFakeClock(time.Now())
	rec := &reconcileRecorder{}
	events := &eventLog{}
	putRegistry(t, cli, "new", "2.0.0")
	putRegistry(t, cli, "old", "1.0.0")
	putStatus(t, cli, versiongate.Status{State: versiongate.StateDone, Version: ver(t, "1.0.0"), MinimumCompatibleRelease: rel(t, "1.0.0")})
	_, err := cli.Delete(ctx, testStatusKey)
	require.NoError(t, err)
	g, _ := newGate(t, cli, gateOpts{id: "new", version: "2.0.0", minCompat: "2.0.0", clock: clk, rec: rec, events: events})
	runGate(t, ctx, g)

	waitPhase(t, g, versiongate.PhaseRestricting)
	require.Equal(t, []versiongate.Node{{ID: "old", Release: rel(t, "1.0.0")}}, g.Blocking())
	eventually(t, func() bool { return slices.Contains(events.list(), "Warning "+versiongate.ReasonStatusMissing) }, "StatusMissing warning")
	clk.Step(time.Hour)
	_, _, ok := getStatus(t, cli)
	require.False(t, ok, "a status was written while the old node serves")
	require.Empty(t, rec.calls())

	_, err = cli.Delete(ctx, testNodesPrefix+"old")
	require.NoError(t, err)
	waitPhase(t, g, versiongate.PhaseDone)
	st, _, ok := getStatus(t, cli)
	require.True(t, ok)
	require.Equal(t, versiongate.Status{State: versiongate.StateDone, Version: ver(t, "2.0.0"), MinimumCompatibleRelease: rel(t, "2.0.0")}, st)
	require.Len(t, rec.calls(), 1)
}

// On etcd, the status written after a missing one is conditioned on the
// records in the write's transaction: an old node whose record lands right
// before that write commits makes it fail, and the leader waits for the
// node to go.
func TestStatusAfterMissingOneConditionedOnRecords(t *testing.T) {
	e, cli := etcdClient(t)
	ctx := testContext(t)
	putRegistry(t, cli, "new", "2.0.0")

	gateCli := e.Client(t)
	var g *versiongate.Gate
	var injected bool
	committed := make(chan struct{})
	gateCli.KV = &hookKV{KV: gateCli.KV, before: func() func() {
		if !injected && g.Phase() == versiongate.PhaseReconciling {
			injected = true
			putRegistry(t, cli, "late", "1.0.0")
			return func() { close(committed) }
		}
		return nil
	}}
	g, _ = newGate(t, gateCli, gateOpts{id: "new", version: "2.0.0", minCompat: "2.0.0", clock: clocktesting.NewFakeClock(time.Now())})
	runGate(t, ctx, g)

	select {
	case <-committed:
	case <-time.After(time.Minute):
		t.Fatal("the status write was never attempted")
	}
	eventually(t, func() bool { return nodeIDs(g.Blocking()) == "late@1.0.0" }, "late node seen")
	_, _, ok := getStatus(t, cli)
	require.False(t, ok, "the status was written past the late node's record")

	_, err := cli.Delete(ctx, testNodesPrefix+"late")
	require.NoError(t, err)
	waitPhase(t, g, versiongate.PhaseDone)
	st, _, ok := getStatus(t, cli)
	require.True(t, ok)
	require.Equal(t, rel(t, "2.0.0"), st.MinimumCompatibleRelease)
}
