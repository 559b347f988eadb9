package lbrecon_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/reconkit/reconkit/lbrecon"
	"github.com/reconkit/reconkit/lbrecon/lbrecontest"
)

// onLB counts the engine's objects that belong to load balancer id: its
// backends and frontends, and their binds and servers.
func onLB(eng *lbrecontest.Engine, id string) int {
	objs := eng.Objects()
	parents := map[lbrecon.Key]string{}
	for _, o := range objs {
		switch s := o.Spec.(type) {
		case lbrecon.BackendSpec:
			parents[o.Key()] = s.LoadBalancer
		case lbrecon.FrontendSpec:
			parents[o.Key()] = s.LoadBalancer
		}
	}
	n := 0
	for _, o := range objs {
		lb, ok := parents[o.Key()]
		for _, k := range lbrecontest.LoadBalancerRefs(o) {
			lb, ok = parents[k]
		}
		if ok && lb == id {
			n++
		}
	}
	return n
}

// The load balancer's ID changed: the new one is reconciled by a new
// reconciler, and the old one is torn down. Only the old load balancer's
// owned objects go, children before parents, each destroyed once, and an
// untagged object on it stays.
func TestTeardownAfterIDChange(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		eng := realistic(nil)
		old := desc(2, 2, 3)
		var o outcomes
		r1 := newLB(t, eng, old, o.hook)
		require.NoError(t, r1.Reconcile(t.Context()))
		moved := desc(2, 2, 3)
		moved.ID = "lb-2"
		r2 := newLB(t, eng, moved, nil)
		require.NoError(t, r2.Reconcile(t.Context()))
		hand := eng.Put(lbrecon.Object{Kind: lbrecon.KindBackend, Name: "debug", Spec: lbrecon.BackendSpec{LoadBalancer: "lb-1"}})
		eng.ResetCalls()

		require.NoError(t, r1.Teardown(t.Context()))
		require.Equal(t, objectCount(old), eng.Calls()[lbrecon.VerbDestroy], "one destroy per object, none re-issued")
		require.Zero(t, o.get("destroy/conflict"), "no parent destroyed while in use")
		require.Equal(t, 1, onLB(eng, "lb-1"), "only the untagged object is left on the old load balancer")
		require.Contains(t, eng.Objects(), hand)
		require.Equal(t, objectCount(moved), onLB(eng, "lb-2"), "the new load balancer is untouched")
		requireConverged(t, eng, r2, moved)

		// A listing confirms it: a reconciler without memory has nothing
		// left to tear down.
		res, err := newLB(t, eng, old, nil).TeardownOnce(t.Context())
		require.NoError(t, err)
		require.True(t, res.Converged)
		require.True(t, res.Plan.Empty())
		require.Equal(t, 1, o.get("teardown/ok"), "the teardown is observed")
	})
}

// The non-blocking teardown never waits, and a host's requeue loop around
// it tears the load balancer down with one destroy per object.
func TestTeardownOnceNeverWaits(t *testing.T) {
	fc := clocktesting.NewFakeClock(time.Unix(1000, 0))
	eng := realistic(func(c *lbrecontest.Config) { c.Clock, c.Latency = fc, 0 })
	lb := desc(2, 2, 4)
	var o outcomes
	r := newLB(t, eng, lb, func(c *lbrecon.Config) { c.Clock = fc; o.hook(c) })
	for calls := 1; ; calls++ {
		require.Less(t, calls, 100, "no convergence")
		res, err := r.ReconcileOnce(t.Context())
		require.NoError(t, err)
		if res.Converged {
			break
		}
		fc.Step(res.RequeueAfter)
	}
	eng.ResetCalls()
	for calls := 1; ; calls++ {
		require.Less(t, calls, 100, "no convergence")
		res, err := r.TeardownOnce(t.Context())
		require.NoError(t, err)
		if res.Converged {
			require.True(t, res.Plan.Empty())
			break
		}
		require.Positive(t, res.RequeueAfter)
		require.LessOrEqual(t, res.RequeueAfter, lbrecon.DefaultMaxPollInterval)
		fc.Step(res.RequeueAfter)
	}
	require.Equal(t, objectCount(lb), eng.Calls()[lbrecon.VerbDestroy], "one destroy per object, none re-issued")
	require.Zero(t, o.get("destroy/conflict"), "no parent destroyed while in use")
	require.Empty(t, eng.Objects())
}

// A failed object is destroyed, not repaired or recreated, and an object
// pending for ever does not hold the teardown back.
func TestTeardownDestroysFailedAndPendingObjects(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		eng := realistic(func(c *lbrecontest.Config) { c.Repair = true })
		lb := desc(2, 1, 3)
		r := newLB(t, eng, lb, nil)
		require.NoError(t, r.Reconcile(t.Context()))
		var servers []lbrecon.Object
		for _, o := range eng.Objects() {
			if o.Kind == lbrecon.KindServer {
				servers = append(servers, o)
			}
		}
		require.True(t, eng.SetObjectState(servers[0].Key(), lbrecon.StateFailed))
		require.True(t, eng.SetObjectState(servers[1].Key(), lbrecon.StatePending))
		eng.ResetCalls()
		require.NoError(t, r.Teardown(t.Context()))
		calls := eng.Calls()
		require.Zero(t, calls[lbrecon.VerbRepair], "a failed object is not repaired on the way out")
		require.Zero(t, calls[lbrecon.VerbCreate], "nor recreated")
		require.Equal(t, objectCount(lb), calls[lbrecon.VerbDestroy])
		require.Empty(t, eng.Objects())
	})
}

// A plain Reconciler tears down every owned object of its steps' kinds,
// and nothing untagged or of another owner.
func TestReconcilerTeardownDestroysEveryOwnedObject(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		eng := realistic(nil)
		a, b := desc(1, 1, 2), desc(1, 1, 2)
		b.ID = "lb-2"
		for _, lb := range []lbrecon.LoadBalancer{a, b} {
			require.NoError(t, newLB(t, eng, lb, nil).Reconcile(t.Context()))
		}
		other := desc(1, 1, 2)
		other.ID = "lb-3"
		require.NoError(t, newLB(t, eng, other, func(c *lbrecon.Config) { c.Tag = "owner=svc-2" }).Reconcile(t.Context()))
		eng.Put(lbrecon.Object{Kind: lbrecon.KindBackend, Name: "debug", Spec: lbrecon.BackendSpec{LoadBalancer: "lb-1"}})

		r, err := lbrecon.New(lbrecon.Config{Engine: eng, Tag: owner, Journal: lbrecon.NoJournal, Steps: a.Steps(), Scope: "lb-1"})
		require.NoError(t, err)
		require.NoError(t, r.Teardown(t.Context()))
		require.Zero(t, onLB(eng, "lb-2"), "every owned object goes, on any load balancer")
		require.Equal(t, 1, onLB(eng, "lb-1"), "the untagged object stays")
		require.Equal(t, objectCount(other), onLB(eng, "lb-3"), "another owner's objects stay")
	})
}

func TestTeardownCancellationEndsPromptly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		eng := realistic(func(c *lbrecontest.Config) { c.DeleteDelay = time.Minute })
		lb := desc(2, 1, 3)
		r := newLB(t, eng, lb, nil)
		require.NoError(t, r.Reconcile(t.Context()))
		ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
		defer cancel()
		start := time.Now()
		err := r.Teardown(ctx)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.Equal(t, 3*time.Second, time.Since(start), "returned as the context ended")
	})
}
