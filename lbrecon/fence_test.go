package lbrecon_test

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/require"

	"github.com/reconkit/reconkit/internal/leadership"
	"github.com/reconkit/reconkit/lbrecon"
	"github.com/reconkit/reconkit/lbrecon/lbrecontest"
)

// A fence that holds a token above the live leader's (a restored backup
// sent the token source back) refuses its writes with one clear error
// naming the fence, both tokens and how to clear it, once per call however
// many writes the pass wanted, and without reaching the engine. Once
// cleared, the leader writes, and a deposed writer is still refused.
func TestFenceAheadOfTheLeaderReportedOnce(t *testing.T) {
	for _, mode := range []string{"Reconcile", "ReconcileOnce"} {
		t.Run(mode, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				eng := newEngine(lbrecontest.Config{})
				const clear = "run 'agent fence reset lb-1'"
				fence := lbrecon.NewFence("lb-1 (agent store)", 12, clear)
				var checks atomic.Int32
				admit := lbrecon.CheckToken(fence.Admit)
				guarded := lbrecon.Guard(eng, func(ctx context.Context, v lbrecon.Verb, o lbrecon.Object) error {
					checks.Add(1)
					return admit(ctx, v, o)
				})
				lb := desc(4, 2, 10) // 4 backends to create in the first pass
				r := newLB(t, guarded, lb, func(c *lbrecon.Config) { c.Parallelism = 1 })
				ctx := lbrecon.WithToken(t.Context(), 7)
				var err error
				if mode == "Reconcile" {
					err = r.Reconcile(ctx)
				} else {
					_, err = r.ReconcileOnce(ctx)
				}
				require.ErrorIs(t, err, lbrecon.ErrFenced)
				var fe *lbrecon.FenceError
				require.ErrorAs(t, err, &fe)
				require.Equal(t, uint64(12), fe.Stored)
				require.Equal(t, uint64(7), fe.Token)
				msg := err.Error()
				require.Equal(t, 1, strings.Count(msg, "lb-1 (agent store)"), "reported once: %s", msg)
				require.Equal(t, 1, strings.Count(msg, clear), "reported once: %s", msg)
				require.Contains(t, msg, "token 12")
				require.Contains(t, msg, "token 7")
				require.Equal(t, int32(1), checks.Load(), "the pass stops at the first refusal")
				require.Equal(t, map[lbrecon.Verb]int{lbrecon.VerbList: 1}, eng.Calls(), "one List, no write, no second pass")

				fence.Reset(7) // the operator clears the fence
				require.NoError(t, r.Reconcile(ctx))
				requireConverged(t, eng, r, lb)

				// A deposed writer whose pass would destroy (a port
				// removed) and then create (a target added): refused at
				// its first write, without a retry, and nothing else is
				// tried.
				lb.Ports = lb.Ports[:3]
				lb.Targets = append(lb.Targets, lbrecon.Target{Name: "late", Address: netip.MustParseAddr("10.0.9.1")})
				deposed := newLB(t, guarded, lb, func(c *lbrecon.Config) { c.Parallelism = 1 })
				eng.ResetCalls()
				checks.Store(0)
				err = deposed.Reconcile(lbrecon.WithToken(t.Context(), 6))
				require.ErrorIs(t, err, lbrecon.ErrFenced)
				require.False(t, errors.Is(err, lbrecon.ErrNoToken))
				require.Equal(t, int32(1), checks.Load(), "one refusal, no retry, no later phase")
				require.Equal(t, map[lbrecon.Verb]int{lbrecon.VerbList: 1}, eng.Calls())
			})
		})
	}
}

// A refused writer is told the way election and versiongate tell it: its
// leadership is lost, with the one sentinel both packages export.
func TestFenceErrorIsLeadershipLost(t *testing.T) {
	f := lbrecon.NewFence("test", 7, "")
	err := f.Admit(3)
	require.ErrorIs(t, err, lbrecon.ErrFenced)
	require.ErrorIs(t, err, leadership.ErrLost) // election.ErrLeadershipLost and versiongate.ErrLeadershipLost
}
