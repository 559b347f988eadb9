package lbrecon_test

import (
	"net/netip"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/reconkit/reconkit/lbrecon"
	"github.com/reconkit/reconkit/lbrecon/lbrecontest"
)

// onLBs reconciles load balancers of one shape with the given IDs for the
// owner of tag on eng.
func onLBs(t *testing.T, eng *lbrecontest.Engine, tag string, ids ...string) lbrecon.LoadBalancer {
	t.Helper()
	lb := desc(2, 2, 3)
	if tag != owner {
		lb.Suffix = "other"
	}
	for _, id := range ids {
		lb.ID = id
		require.NoError(t, newLB(t, eng, lb, func(c *lbrecon.Config) { c.Tag = tag }).Reconcile(t.Context()))
	}
	return lb
}

// After a restart the reconcilers of the old IDs are gone: TeardownExcept
// finds the old load balancers in the listing and tears them all down,
// children before parents, each object destroyed once although the
// listing lags and deletion is asynchronous; the kept load balancer,
// another owner's and an untagged object stay.
func TestTeardownExceptRemovesOtherLoadBalancers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		eng := realistic(nil)
		lb := onLBs(t, eng, owner, "lb-1", "lb-2", "lb-3")
		onLBs(t, eng, "owner=svc-2", "lb-4")
		hand := eng.Put(lbrecon.Object{Kind: lbrecon.KindBackend, Name: "debug", Spec: lbrecon.BackendSpec{LoadBalancer: "lb-2"}})
		eng.ResetCalls()

		var o outcomes
		cfg := lbrecon.Config{Engine: eng, Tag: owner, Journal: lbrecon.NoJournal}
		o.hook(&cfg)
		require.NoError(t, lbrecon.TeardownExcept(t.Context(), cfg, "lb-1"))
		require.Equal(t, 2*objectCount(lb), eng.Calls()[lbrecon.VerbDestroy], "one destroy per object, none re-issued")
		require.Zero(t, o.get("destroy/conflict"), "no parent destroyed while in use")
		require.Zero(t, onLB(eng, "lb-3"))
		require.Equal(t, 1, onLB(eng, "lb-2"), "only the untagged object is left")
		require.Contains(t, eng.Objects(), hand)
		lb.ID = "lb-1"
		requireConverged(t, eng, newLB(t, eng, lb, nil), lb)
		require.Equal(t, objectCount(lb), onLB(eng, "lb-4"), "another owner's load balancer is untouched")

		// A listing confirms it: nothing is left to tear down.
		eng.ResetCalls()
		require.NoError(t, lbrecon.TeardownExcept(t.Context(), cfg, "lb-1"))
		require.Zero(t, eng.Calls()[lbrecon.VerbDestroy])
	})
}

// Keeping nothing ("" is ignored) tears down every load balancer of the
// owner, and only the owner's.
func TestTeardownExceptNothingKept(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		eng := realistic(nil)
		lb := onLBs(t, eng, owner, "lb-1", "lb-2")
		onLBs(t, eng, "owner=svc-2", "lb-3")
		require.NoError(t, lbrecon.TeardownExcept(t.Context(), lbrecon.Config{Engine: eng, Tag: owner, Journal: lbrecon.NoJournal}, ""))
		require.Zero(t, onLB(eng, "lb-1"))
		require.Zero(t, onLB(eng, "lb-2"))
		require.Equal(t, objectCount(lb), onLB(eng, "lb-3"))
	})
}

// A bind or server stays when its parent is kept, even with no backend or
// frontend of its own load balancer's ID in the listing: it is found by
// its parent, not by a pattern.
func TestTeardownExceptKeepsChildrenOfKeptParents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		eng := realistic(nil)
		lb := onLBs(t, eng, owner, "lb-1")
		eng.ResetCalls()
		require.NoError(t, lbrecon.TeardownExcept(t.Context(), lbrecon.Config{Engine: eng, Tag: owner, Journal: lbrecon.NoJournal}, "lb-1"))
		require.Zero(t, eng.Calls()[lbrecon.VerbDestroy])
		require.Equal(t, objectCount(lb), onLB(eng, "lb-1"))
	})
}

// The non-blocking form never waits, and one Leftovers kept across calls
// of a requeue loop destroys each object once under asynchronous deletion.
func TestLeftoversTeardownOnceNeverWaits(t *testing.T) {
	fc := clocktesting.NewFakeClock(time.Unix(1000, 0))
	eng := realistic(func(c *lbrecontest.Config) { c.Clock, c.Latency = fc, 0 })
	lb := desc(2, 2, 3)
	for _, id := range []string{"lb-1", "lb-2"} {
		lb.ID = id
		r := newLB(t, eng, lb, func(c *lbrecon.Config) { c.Clock = fc })
		for calls := 1; ; calls++ {
			require.Less(t, calls, 100, "no convergence")
			res, err := r.ReconcileOnce(t.Context())
			require.NoError(t, err)
			if res.Converged {
				break
			}
			fc.Step(res.RequeueAfter)
		}
	}
	eng.ResetCalls()
	l, err := lbrecon.NewLeftovers(lbrecon.Config{Engine: eng, Tag: owner, Journal: lbrecon.NoJournal, Clock: fc}, "lb-1")
	require.NoError(t, err)
	for calls := 1; ; calls++ {
		require.Less(t, calls, 100, "no convergence")
		res, err := l.TeardownOnce(t.Context())
		require.NoError(t, err)
		if res.Converged {
			require.True(t, res.Plan.Empty())
			break
		}
		require.Positive(t, res.RequeueAfter)
		fc.Step(res.RequeueAfter)
	}
	require.Equal(t, objectCount(lb), eng.Calls()[lbrecon.VerbDestroy], "one destroy per object, none re-issued")
	require.Zero(t, onLB(eng, "lb-2"))
	require.Equal(t, objectCount(lb), onLB(eng, "lb-1"))
}

func TestNewLeftoversRejectsBadConfig(t *testing.T) {
	_, err := lbrecon.NewLeftovers(lbrecon.Config{Engine: lbrecontest.New(lbrecontest.Config{}), Tag: "owner", Journal: lbrecon.NoJournal}, "lb-1")
	require.ErrorIs(t, err, lbrecon.ErrInvalidConfig)
}

// The kept load balancer's objects are not the teardown's business: one
// pending for ever neither holds it back nor fails it.
func TestTeardownExceptIgnoresKeptPendingObjects(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		eng := realistic(nil)
		lb := onLBs(t, eng, owner, "lb-1", "lb-2")
		for _, o := range eng.Objects() {
			if s, ok := o.Spec.(lbrecon.BackendSpec); ok && s.LoadBalancer == "lb-1" {
				require.True(t, eng.SetObjectState(o.Key(), lbrecon.StatePending))
				break
			}
		}
		start := time.Now()
		require.NoError(t, lbrecon.TeardownExcept(t.Context(), lbrecon.Config{Engine: eng, Tag: owner, Journal: lbrecon.NoJournal, PendingTimeout: time.Hour}, "lb-1"))
		require.Less(t, time.Since(start), time.Hour, "waited for the kept load balancer")
		require.Zero(t, onLB(eng, "lb-2"))
		require.Equal(t, objectCount(lb), onLB(eng, "lb-1"))

		// With no leftover, one listing suffices: no wait at all.
		eng.ResetCalls()
		start = time.Now()
		require.NoError(t, lbrecon.TeardownExcept(t.Context(), lbrecon.Config{Engine: eng, Tag: owner, Journal: lbrecon.NoJournal}, "lb-1"))
		require.Less(t, time.Since(start), lbrecon.DefaultPollInterval, "waited with nothing to tear down")
		require.Equal(t, 1, eng.Calls()[lbrecon.VerbList])
	})
}

// A server or bind belongs to its parent's load balancer: one whose parent
// is not listed with the tag (an untagged backend of the kept load
// balancer) is left alone, while the leftover is torn down.
func TestTeardownExceptLeavesChildrenOfUnknownParents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		eng := realistic(nil)
		onLBs(t, eng, owner, "lb-2")
		hand := eng.Put(lbrecon.Object{Kind: lbrecon.KindBackend, Name: "debug", State: lbrecon.StateOK,
			Spec: lbrecon.BackendSpec{LoadBalancer: "lb-1"}})
		child := eng.Put(lbrecon.Object{Kind: lbrecon.KindServer, Name: "debug", State: lbrecon.StateOK, Tags: []string{owner},
			Spec: lbrecon.ServerSpec{Backend: hand.ID, Address: netip.MustParseAddr("10.0.0.9"), Port: 30000}})
		require.NoError(t, lbrecon.TeardownExcept(t.Context(), lbrecon.Config{Engine: eng, Tag: owner, Journal: lbrecon.NoJournal}, "lb-1"))
		require.ElementsMatch(t, []lbrecon.Object{hand, child}, eng.Objects())
		require.Zero(t, onLB(eng, "lb-2"))
	})
}

// A predecessor was creating the old load balancer when it died, and its
// creations show only after the declared 3 s lag: the leftovers' teardown,
// blocking or one pass at a time, converges only from a listing made the
// lag after it started, so it finds and tears them down.
func TestLeftoversWaitForLateCreations(t *testing.T) {
	for _, oncePasses := range []bool{false, true} {
		t.Run(map[bool]string{false: "Teardown", true: "TeardownOnce"}[oncePasses], func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				eng := newEngine(lbrecontest.Config{ListLag: 3 * time.Second, DeclareListLag: true})
				eng.LoseCreateAnswers(1) // every answer lost: the predecessor dies after its first wave
				_, err := newLB(t, eng, desc(2, 1, 1), nil).ReconcileOnce(t.Context())
				require.NoError(t, err)
				require.NotEmpty(t, eng.Objects(), "the predecessor's creations happened")

				cfg := lbrecon.Config{Engine: eng, Tag: owner, Journal: lbrecon.NoJournal}
				if oncePasses {
					l, err := lbrecon.NewLeftovers(cfg, "lb-2")
					require.NoError(t, err)
					converged, _ := budgetRun(t, 50, l.TeardownOnce)
					require.True(t, converged)
				} else {
					require.NoError(t, lbrecon.TeardownExcept(t.Context(), cfg, "lb-2"))
				}
				<-time.After(10 * time.Second)
				require.Empty(t, eng.Objects(), "a late creation on the old ID was left behind")
			})
		})
	}
}
