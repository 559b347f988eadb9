package lbrecon_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconkit/reconkit/lbrecon"
)

// The load-balancer object is a parent like any other (the plan's
// references, Step.Refs): its children wait for it to be ok, and of two
// load-balancer objects alike past the lag the one children refer to is
// kept.

// Called again and again while the provisioned load balancer is pending
// (a host may call before RequeueAfter), the plan creates no backend,
// frontend or listener before the load balancer is ok.
func TestProvisionChildrenWaitForThePendingLoadBalancer(t *testing.T) {
	for _, s := range shapes {
		t.Run(s.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				w := &parentWatch{Engine: s.engine(0, nil)}
				lb := s.provisioned(1, 1)
				r := newLB(t, w, lb, nil)
				for range 60 {
					res, err := r.ReconcileOnce(t.Context())
					require.NoError(t, err)
					if res.Converged {
						break
					}
					<-time.After(100 * time.Millisecond)
				}
				require.Positive(t, w.created)
				require.Empty(t, w.early, "created before their load balancer was ok")
			})
		})
	}
}

// Two provisioned load-balancer objects alike, past the lag: the one its
// backends and frontends or listeners refer to is kept although the other
// has the lower ID, so nothing under it is destroyed or made again.
func TestProvisionDuplicateKeptIsTheOneWithChildren(t *testing.T) {
	for _, s := range shapes {
		t.Run(s.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				eng := s.engine(0, nil)
				lb := s.provisioned(1, 1)
				require.NoError(t, newLB(t, eng, lb, nil).Reconcile(t.Context()))
				orig := lbObject(t, eng)
				dup := duplicate(eng, orig, "a") // lower than every ID the engine gives
				eng.ResetCalls()

				r := newLB(t, eng, lb, nil)
				onceUntilConverged(t, r)
				require.Empty(t, stored(eng, []lbrecon.Key{dup.Key()}), "the duplicate is destroyed")
				require.Equal(t, []lbrecon.Key{orig.Key()}, stored(eng, []lbrecon.Key{orig.Key()}), "the one with children is kept")
				require.Equal(t, 1, eng.Calls()[lbrecon.VerbDestroy], "only the duplicate is destroyed")
				require.Zero(t, eng.Calls()[lbrecon.VerbCreate], "nothing is created again")
			})
		})
	}
}
