package etcdstore_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/reconkit/reconkit/versiongate"
)

// On etcd, a record an operator emptied (etcdctl put of "") or left with
// a value that does not decode is no deleted record: the store reports an
// empty one corrupt, and the leader counts either as a node of unknown
// release that blocks the restriction, however long, until the record
// decodes again or goes.
func TestEmptyRecordIsNoDeletion(t *testing.T) {
	for _, tc := range []struct{ name, value string }{
		{name: "empty", value: ""},
		{name: "does not decode", value: "{roles: [controller"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, cli := etcdClient(t)
			ctx := testContext(t)
			clk := clocktesting.NewFakeClock(time.Now())
			rec := &reconcileRecorder{}
			putRegistry(t, cli, "new", "2.0.0")
			putRegistry(t, cli, "old", "1.0.0")
			putStatus(t, cli, versiongate.Status{State: versiongate.StateDone, Version: ver(t, "1.0.0"), MinimumCompatibleRelease: rel(t, "1.0.0")})
			g, _ := newGate(t, cli, gateOpts{id: "new", version: "2.0.0", minCompat: "2.0.0", clock: clk, rec: rec})
			runGate(t, ctx, g)
			waitPhase(t, g, versiongate.PhaseRestricting)
			eventually(t, func() bool { return nodeIDs(g.Blocking()) == "old@1.0.0" }, "the leader waits for the old node")

			_, err := cli.Put(ctx, testNodesPrefix+"old", tc.value)
			require.NoError(t, err)
			eventually(t, func() bool { return nodeIDs(g.Blocking()) == "old@unknown" }, "the leader counts the old record as unknown (blocking: %v)", g.Blocking())
			clk.Step(time.Hour)
			st, _, ok := getStatus(t, cli)
			require.True(t, ok)
			require.Equal(t, rel(t, "1.0.0"), st.MinimumCompatibleRelease, "the minimum was raised under a record that reads as nothing")
			require.Empty(t, rec.calls())

			if tc.value == "" {
				recs, _, err := etcdStore(t, cli).ListRecords(ctx)
				require.NoError(t, err)
				for _, r := range recs {
					if r.ID == "old" {
						require.ErrorIs(t, r.Corrupt, versiongate.ErrCorruptRecord)
					}
				}
			}

			_, err = cli.Delete(ctx, testNodesPrefix+"old")
			require.NoError(t, err)
			eventually(t, func() bool { clk.Step(time.Second); return g.Phase() == versiongate.PhaseDone }, "done once the old node's record is gone")
			require.Len(t, rec.calls(), 1)
		})
	}
}
