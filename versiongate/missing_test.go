package versiongate_test

import (
	"context"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reconkit/reconkit/versiongate"
	"github.com/reconkit/reconkit/versiongate/versiongatetest"
)

// A status deleted or damaged under a node that passed WaitReady on it and
// still serves is no licence to reconcile: the leader warns, waits until
// no node below its minimum compatible release has a record, and only
// then reconciles and writes the status.
func TestMissingStatusWaitsForIncompatibleRecords(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status []byte
	}{
		{name: "deleted"},
		{name: "corrupt", status: []byte("\x08\x02garbage")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			c := newMemCluster(t)
			c.store.PutRecord("old", nodeRecord(t, "old", "1.0.0"))
			if tc.status != nil {
				c.store.SetStatus(tc.status)
			}
			n := c.node("new", "2.0.0", "2.0.0", -1)
			n.run(t)
			require.NoError(t, versiongatetest.WaitPhase(ctx, n.gate, versiongate.PhaseRestricting))
			require.NoError(t, versiongatetest.WaitBlocking(ctx, n.gate, "old"))
			require.NoError(t, versiongatetest.Wait(ctx, "the StatusMissing warning", func() bool {
				return slices.Contains(n.rec.eventList(), "Warning "+versiongate.ReasonStatusMissing)
			}, nil))
			// However long the old node stays, nothing is reconciled or
			// written.
			c.clock.Step(versiongate.DefaultReconcileInterval * 10)
			require.Empty(t, n.rec.reconciled())
			b, ok := c.store.Status()
			require.Equal(t, tc.status != nil, ok)
			require.Equal(t, tc.status, b)
			require.Equal(t, versiongate.PhaseRestricting, n.gate.Phase())

			c.store.RemoveRecord("old")
			require.NoError(t, versiongatetest.WaitPhase(ctx, n.gate, versiongate.PhaseDone))
			require.Len(t, n.rec.reconciled(), 1)
			require.Equal(t, versiongate.Status{State: versiongate.StateDone, Version: mustVersion(t, "2.0.0"),
				MinimumCompatibleRelease: mustRelease(t, "2.0.0")}, storedStatus(t, c.store))
		})
	}
}

// The status a leader writes after finding none is conditioned on the
// records, as a restricted status is: an old node that published its
// record after the summary the leader acted on (here during the
// reconcile, while the leader's watch lags) makes the write fail, and the
// leader waits for the node to go.
func TestMissingStatusWriteConditionedOnRecords(t *testing.T) {
	ctx := context.Background()
	c := newMemCluster(t)
	late := nodeRecord(t, "late", "1.0.0")
	n := c.node("new", "2.0.0", "2.0.0", -1, func(cfg *versiongate.Config) {
		first := true
		cfg.Reconcile = func(ctx context.Context, l versiongate.Term) error {
			if first {
				first = false
				c.store.PauseWatches()
				c.store.PutRecord("late", late)
			}
			return nil
		}
	})
	n.run(t)
	require.NoError(t, versiongatetest.Wait(ctx, "a refused status write", func() bool { return n.conn.RefusedWrites() > 0 }, nil))
	_, ok := c.store.Status()
	require.False(t, ok, "the status was written past the late node's record")

	c.store.ResumeWatches()
	require.NoError(t, versiongatetest.WaitBlocking(ctx, n.gate, "late"))
	_, ok = c.store.Status()
	require.False(t, ok)

	c.store.RemoveRecord("late")
	require.NoError(t, versiongatetest.WaitPhase(ctx, n.gate, versiongate.PhaseDone))
	require.Equal(t, mustRelease(t, "2.0.0"), storedStatus(t, c.store).MinimumCompatibleRelease)
}

// A first boot, alone or among compatible nodes, warns about nothing and
// does not wait.
func TestFirstBootAmongCompatibleNodes(t *testing.T) {
	ctx := context.Background()
	c := newMemCluster(t)
	n := c.node("a", "2.0.0", "2.0.0", -1)
	n.run(t)
	require.NoError(t, versiongatetest.WaitPhase(ctx, n.gate, versiongate.PhaseDone))
	require.NotContains(t, n.rec.eventList(), "Warning "+versiongate.ReasonStatusMissing)
	require.NotContains(t, phases(n.rec), versiongate.PhaseRestricting)
}

func nodeRecord(t *testing.T, id, version string) []byte {
	t.Helper()
	b, err := versiongate.EncodeNodeRelease(id, mustVersion(t, version))
	require.NoError(t, err)
	return b
}

func mustVersion(t *testing.T, s string) versiongate.Version {
	t.Helper()
	v, err := versiongate.ParseVersion(s)
	require.NoError(t, err)
	return v
}

func phases(r *recorder) []versiongate.Phase {
	var out []versiongate.Phase
	for _, o := range r.observations(versiongate.EventPhase) {
		out = append(out, o.Phase)
	}
	return out
}
