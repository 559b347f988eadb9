package versiongate_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reconkit/reconkit/versiongate"
	"github.com/reconkit/reconkit/versiongate/versiongatetest"
)

// A record the gate cannot decode (an operator's edit, a typo, a value
// from a release that writes another format) may belong to a node that
// still serves an old release: it counts as a node of unknown release,
// which blocks the restriction, and is listed as such, until it decodes
// again. Skipping it would be a licence to raise the minimum under that
// node.
func TestUndecodableRecordBlocksRestrict(t *testing.T) {
	for _, tc := range []struct {
		name  string
		value []byte
	}{
		{name: "not protobuf", value: []byte("\xff\xff garbage")},
		{name: "no release", value: []byte("\x0a\x03old")}, // node ID only
		{name: "another node's", value: nil},               // filled in below
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			c := newMemCluster(t)
			value := tc.value
			if value == nil {
				value = nodeRecord(t, "someone-else", "3.0.0")
			}
			c.store.SetStatus(encodeStatus(t, versiongate.Status{State: versiongate.StateDone,
				Version: mustVersion(t, "1.0.0"), MinimumCompatibleRelease: mustRelease(t, "1.0.0")}))
			c.store.PutRecord("old", value)
			n := c.node("new", "2.0.0", "2.0.0", -1)
			n.run(t)
			require.NoError(t, versiongatetest.WaitPhase(ctx, n.gate, versiongate.PhaseRestricting))
			require.NoError(t, versiongatetest.WaitBlocking(ctx, n.gate, "old"))
			require.Equal(t, "[old@unknown]", fmt.Sprint(n.gate.Blocking()))
			c.clock.Step(versiongate.DefaultReconcileInterval * 10)
			require.Empty(t, n.rec.reconciled())
			require.Equal(t, mustRelease(t, "1.0.0"), storedStatus(t, c.store).MinimumCompatibleRelease,
				"the minimum was raised under a node whose release is unknown")

			// Repaired to a compatible release, it no longer blocks.
			c.store.PutRecord("old", nodeRecord(t, "old", "2.0.0"))
			require.NoError(t, versiongatetest.WaitPhase(ctx, n.gate, versiongate.PhaseDone))
			require.Equal(t, mustRelease(t, "2.0.0"), storedStatus(t, c.store).MinimumCompatibleRelease)
		})
	}
}
