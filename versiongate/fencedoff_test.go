package versiongate_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconkit/reconkit/versiongate"
	"github.com/reconkit/reconkit/versiongate/versiongatetest"
)

// messageLog records the messages of a gate's events of one reason.
type messageLog struct {
	reason string
	mu     sync.Mutex
	msgs   []string
}

func (l *messageLog) Event(_, reason, message string) {
	if reason != l.reason {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.msgs = append(l.msgs, message)
}

func (l *messageLog) messages() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.msgs...)
}

// A fence ahead of a live term (tokens that went back: a Lease recreated by
// an old client, a restored backup) is never silent, and is reported once:
// one FencedOff warning that names the fence, the stored token, the
// term's token and how to clear the fence, however many terms it refuses.
// Here the node's terms count up from 1 until they pass the stored 5.
func TestFenceAheadOfLiveTermIsReportedOnce(t *testing.T) {
	c := newMemCluster(t)
	ctx := context.Background()
	require.NoError(t, c.store.Fence(ctx, versiongatetest.NewTerm("earlier-fleet", 5)))
	events := &messageLog{reason: versiongate.ReasonFencedOff}
	n := c.node("new", "2.0.0", "2.0.0", -1, func(cfg *versiongate.Config) { cfg.Events = events })
	n.run(t)
	require.NoError(t, versiongatetest.Wait(ctx, "a FencedOff warning", func() bool { return len(events.messages()) > 0 }, nil))
	msg := events.messages()[0]
	for _, want := range []string{"the in-memory store's fence", "holds token 5", "this term's token 1", "Store.ClearFence"} {
		require.Contains(t, msg, want)
	}
	// Each refused term ends; the gate pauses on its clock and campaigns
	// again, with the next token, until token 5 passes the fence.
	stepUntil(t, c.clock, time.Minute, "phase Done", func() bool { return n.gate.Phase() == versiongate.PhaseDone })
	require.Equal(t, uint64(5), n.rec.reconciled()[0], "the first term to reconcile is the first past the fence")
	require.Len(t, events.messages(), 1, "reported once, not at every refused term: %q", events.messages())

	// A new episode, after a Fence succeeded, is reported again.
	require.NoError(t, c.store.Fence(ctx, versiongatetest.NewTerm("earlier-fleet", 9)))
	require.True(t, n.cand.Kill())
	// The gate pauses on its clock after the term, then campaigns again.
	stepUntil(t, c.clock, time.Second, "a second FencedOff warning", func() bool { return len(events.messages()) == 2 })
	require.True(t, strings.Contains(events.messages()[1], "holds token 9"), events.messages()[1])

	// Cleared as the warning says, the next term leads.
	c.store.ClearFence()
	newTerm := func() bool {
		r := n.rec.reconciled()
		return r[len(r)-1] > 6
	}
	stepUntil(t, c.clock, time.Minute, "a term after the fence was cleared", newTerm)
	require.Len(t, events.messages(), 2)
}
