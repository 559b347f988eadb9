package lbrecon_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconkit/reconkit/lbrecon"
	"github.com/reconkit/reconkit/lbrecon/lbrecontest"
)

// A move whose old load balancer resists its teardown: one pass at a
// time, Result.CurrentConverged says the new load balancer converged (its
// address may be published) while Converged waits for the old one;
// blocking, the teardown's failure wraps ErrPreviousNotTornDown, which
// tells the host the same. Neither says so before the new one is built.
func TestMovingReportsTheCurrentConvergedWhileTheOldResists(t *testing.T) {
	for _, once := range []bool{true, false} {
		t.Run(map[bool]string{true: "ReconcileOnce", false: "Reconcile"}[once], func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				eng := lbrecontest.New(lbrecontest.Config{Latency: 20 * time.Millisecond, Pending: time.Second})
				m, err := lbrecon.NewMoving(lbrecon.Config{Engine: eng, Tag: owner, Journal: lbrecon.NoJournal, RetryBudget: 10 * time.Second}, desc(1, 1, 2))
				require.NoError(t, err)
				require.NoError(t, m.Reconcile(t.Context()))
				eng.FailDestroy(func(o lbrecon.Object) bool { return len(lbrecontest.OnLoadBalancer([]lbrecon.Object{o}, "lb-1")) > 0 }, 1<<20)
				newLB := moved(desc(1, 1, 2), "lb-2")
				require.NoError(t, m.SetLoadBalancer(newLB))
				built := func() bool { return lbrecontest.Converged(newLB, owner)(eng.Objects()) }
				if !once {
					err := m.Reconcile(t.Context())
					require.ErrorIs(t, err, lbrecon.ErrPreviousNotTornDown)
					require.True(t, built())
					require.NotEmpty(t, ownedOn(eng, "lb-1", owner))
					return
				}
				current := 0
				for range 60 {
					res, err := m.ReconcileOnce(t.Context())
					require.NoError(t, err)
					require.False(t, res.Converged, "converged while the old one resists")
					if res.CurrentConverged {
						require.True(t, built(), "current reported converged before it was built")
						current++
					} else {
						require.Zero(t, current, "current converged, then not")
					}
					<-time.After(max(res.RequeueAfter, 100*time.Millisecond))
				}
				require.Positive(t, current)
				require.NotEmpty(t, ownedOn(eng, "lb-1", owner))
			})
		})
	}
}
