package lbrecon_test

import (
	"context"
	"errors"
	"net/netip"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/reconkit/reconkit/backoff"
	"github.com/reconkit/reconkit/lbrecon"
	"github.com/reconkit/reconkit/lbrecon/lbrecontest"
)

// Tests of the guarantees on the knobs of lbrecontest that model real
// provider APIs: list lag, asynchronous deletion, referential integrity,
// unique names.

// realistic is an engine with list lag, asynchronous deletion, referential
// integrity and unique listeners.
func realistic(mod func(*lbrecontest.Config)) *lbrecontest.Engine {
	cfg := lbrecontest.Config{Latency: 20 * time.Millisecond, Pending: time.Second,
		ListLag: 3 * time.Second, DeleteDelay: 2 * time.Second, Integrity: true, UniqueBinds: true}
	if mod != nil {
		mod(&cfg)
	}
	return lbrecontest.New(cfg)
}

// outcomes counts metrics by verb and outcome.
type outcomes struct {
	mu sync.Mutex
	n  map[string]int
}

func (o *outcomes) hook(c *lbrecon.Config) {
	o.n = map[string]int{}
	c.Metrics = lbrecon.MetricsFunc(func(v lbrecon.Verb, out lbrecon.Outcome, _ time.Duration) {
		o.mu.Lock()
		defer o.mu.Unlock()
		o.n[string(v)+"/"+string(out)]++
	})
}

func (o *outcomes) get(key string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.n[key]
}

func objectCount(lb lbrecon.LoadBalancer) int {
	np, na, nt := len(lb.Ports), len(lb.Addresses), len(lb.Targets)
	n := np + np*nt // backends and servers
	if lb.Provision {
		n++  // the load-balancer object
		na++ // its assigned address, bound too
	}
	if lb.Listening == lbrecon.ListenPorts {
		n += np // listeners
	} else {
		n += np + np*na // frontends and binds
	}
	if lb.HealthCheck != nil {
		n += np
	}
	return n
}

func TestListLagNoDuplicatesAndConfirmedSuccess(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		eng := realistic(nil)
		lb := desc(4, 2, 10)
		r := newLB(t, eng, lb, nil)
		start := time.Now()
		require.NoError(t, r.Reconcile(t.Context()))
		// Three waves (backends; frontends and servers; binds), each seen
		// within a second of the 3 s lag: before anything is learnt the
		// polls grow gently from PollInterval, and an estimate learnt from a
		// coarse poll would slow every later wave.
		require.Less(t, time.Since(start), 3*(3*time.Second+time.Second))
		require.Equal(t, objectCount(lb), eng.Calls()[lbrecon.VerbCreate], "every name created once")
		require.Zero(t, eng.Calls()[lbrecon.VerbDestroy])
		requireConverged(t, eng, r, lb)
	})
}

func TestReconcileOnceNeverWaits(t *testing.T) {
	// No latency on a fake clock that only the test moves: a call that
	// waited would never return.
	fc := clocktesting.NewFakeClock(time.Unix(1000, 0))
	eng := realistic(func(c *lbrecontest.Config) { c.Clock, c.Latency = fc, 0 })
	lb := desc(2, 2, 4)
	r := newLB(t, eng, lb, func(c *lbrecon.Config) { c.Clock = fc })
	drive := func() int {
		for calls := 1; ; calls++ {
			require.Less(t, calls, 100, "no convergence")
			res, err := r.ReconcileOnce(t.Context())
			require.NoError(t, err)
			if res.Converged {
				require.True(t, res.Plan.Empty())
				return calls
			}
			require.Positive(t, res.RequeueAfter)
			require.LessOrEqual(t, res.RequeueAfter, lbrecon.DefaultMaxPollInterval)
			fc.Step(res.RequeueAfter)
		}
	}
	drive()
	require.Equal(t, objectCount(lb), eng.Calls()[lbrecon.VerbCreate], "no duplicates across calls: the memory is in the Reconciler")
	requireConverged(t, eng, r, lb)

	lb.Ports = lb.Ports[:1]
	r = newLB(t, eng, lb, func(c *lbrecon.Config) { c.Clock = fc })
	eng.ResetCalls()
	drive()
	require.Equal(t, objectCount(desc(1, 2, 4)), eng.Calls()[lbrecon.VerbDestroy], "no destroy re-issued")
	requireConverged(t, eng, r, lb)
}

func TestAsynchronousDeletionWaitedForNotReissued(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		eng := realistic(nil)
		lb := desc(2, 2, 5)
		r := newLB(t, eng, lb, nil)
		require.NoError(t, r.Reconcile(t.Context()))
		n := objectCount(lb)
		lb.Ports = nil
		var o outcomes
		r = newLB(t, eng, lb, o.hook)
		eng.ResetCalls()
		start := time.Now()
		require.NoError(t, r.Reconcile(t.Context()))
		require.Equal(t, n, eng.Calls()[lbrecon.VerbDestroy], "one destroy per object")
		require.Zero(t, o.get("destroy/conflict"), "no parent destroyed while in use")
		require.Empty(t, eng.Objects())
		// Three levels (servers and binds, frontends, backends), each
		// deleted in 2 s and listed for 3 s more.
		took := time.Since(start)
		require.GreaterOrEqual(t, took, 3*5*time.Second)
		require.Less(t, took, 3*(5*time.Second+lbrecon.DefaultMaxPollInterval))
	})
}

func TestNodePortChangeKeepsBackendsServing(t *testing.T) {
	for _, tc := range []struct {
		name    string
		engine  func(*lbrecontest.Engine) lbrecon.Engine
		creates int
		updates int
	}{
		// An engine without Updater: the servers are replaced.
		{"replaced", func(e *lbrecontest.Engine) lbrecon.Engine { return struct{ lbrecon.Engine }{e} }, 5, 0},
		{"updated in place", func(e *lbrecontest.Engine) lbrecon.Engine { return e }, 0, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				eng := realistic(nil)
				lb := desc(2, 1, 5)
				r := newLB(t, tc.engine(eng), lb, nil)
				require.NoError(t, r.Reconcile(t.Context()))
				eng.ResetCalls()
				eng.ResetLow()
				lb.Ports[0].NodePort = 31000
				r = newLB(t, tc.engine(eng), lb, nil)
				require.NoError(t, r.Reconcile(t.Context()))
				calls := eng.Calls()
				require.Equal(t, tc.creates, calls[lbrecon.VerbCreate])
				require.Equal(t, tc.creates, calls[lbrecon.VerbDestroy])
				require.Equal(t, tc.updates, calls[lbrecon.VerbUpdate])
				for backend, low := range eng.Low(lbrecon.KindServer) {
					require.GreaterOrEqual(t, low, 5, "backend %s fell to %d servers", backend, low)
				}
				requireConverged(t, eng, r, lb)
			})
		})
	}
}

func TestTargetReplacedMakeBeforeBreak(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		eng := realistic(nil)
		lb := desc(2, 1, 4)
		r := newLB(t, eng, lb, nil)
		require.NoError(t, r.Reconcile(t.Context()))
		eng.ResetLow()
		lb.Targets[3] = lbrecon.Target{Name: "node9", Address: netip.MustParseAddr("10.0.0.99")}
		r = newLB(t, eng, lb, nil)
		require.NoError(t, r.Reconcile(t.Context()))
		for backend, low := range eng.Low(lbrecon.KindServer) {
			require.GreaterOrEqual(t, low, 4, "backend %s fell to %d servers", backend, low)
		}
		requireConverged(t, eng, r, lb)
	})
}

// A replace on one reconciler after it converged: the creations show
// within the time it learnt, the first asynchronous deletion takes longer.
// A correct replace needs one List to plan, one to see the new servers in
// service and one to see the old ones gone; a deletion slower than learnt
// costs at most one List more, not a poll every PollInterval.
func TestSlowerDeletionThanLearntCostsOneList(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		eng := realistic(nil)
		lb := desc(2, 1, 4)
		r := newLB(t, eng, lb, nil)
		require.NoError(t, r.Reconcile(t.Context()))
		eng.ResetCalls()
		eng.ResetLow()
		lb.Targets[3] = lbrecon.Target{Name: "node9", Address: netip.MustParseAddr("10.0.0.99")}
		require.NoError(t, r.SetLoadBalancer(lb))
		require.NoError(t, r.Reconcile(t.Context()))
		requireCheapReplace(t, eng, r, lb)
	})
}

// The same with a host's requeue loop around ReconcileOnce.
func TestSlowerDeletionThanLearntCostsOneListOnce(t *testing.T) {
	fc := clocktesting.NewFakeClock(time.Unix(1000, 0))
	eng := realistic(func(c *lbrecontest.Config) { c.Clock, c.Latency = fc, 0 })
	lb := desc(2, 1, 4)
	r := newLB(t, eng, lb, func(c *lbrecon.Config) { c.Clock = fc })
	drive := func() {
		for calls := 1; ; calls++ {
			require.Less(t, calls, 100, "no convergence")
			res, err := r.ReconcileOnce(t.Context())
			require.NoError(t, err)
			if res.Converged {
				return
			}
			fc.Step(res.RequeueAfter)
		}
	}
	drive()
	eng.ResetCalls()
	eng.ResetLow()
	lb.Targets[3] = lbrecon.Target{Name: "node9", Address: netip.MustParseAddr("10.0.0.99")}
	require.NoError(t, r.SetLoadBalancer(lb))
	drive()
	requireCheapReplace(t, eng, r, lb)
}

func requireCheapReplace(t *testing.T, eng *lbrecontest.Engine, r *lbrecon.LoadBalancerReconciler, lb lbrecon.LoadBalancer) {
	t.Helper()
	calls := eng.Calls()
	require.Equal(t, 2, calls[lbrecon.VerbCreate])
	require.Equal(t, 2, calls[lbrecon.VerbDestroy])
	require.LessOrEqual(t, calls[lbrecon.VerbList], 4, "Lists: one to plan, one per wave, at most one more for the slower deletion")
	for backend, low := range eng.Low(lbrecon.KindServer) {
		require.GreaterOrEqual(t, low, 4, "backend %s fell to %d servers", backend, low)
	}
	requireConverged(t, eng, r, lb)
}

// While backend p0 is recreated (it failed, and the engine cannot repair
// it), a target is replaced: p0's servers go with their parent, but p1's
// old server stays until its replacement is in service.
func TestMakeBeforeBreakLostOnlyUnderTheRecreatedParent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		eng := realistic(nil)
		noRepair := struct{ lbrecon.Engine }{eng}
		lb := desc(2, 1, 4)
		r := newLB(t, noRepair, lb, nil)
		require.NoError(t, r.Reconcile(t.Context()))
		ids := map[string]string{}
		for _, o := range eng.Objects() {
			if o.Kind == lbrecon.KindBackend {
				ids[o.Name] = o.ID
			}
		}
		require.True(t, eng.SetObjectState(lbrecon.Key{Kind: lbrecon.KindBackend, ID: ids["p0.svc-1"]}, lbrecon.StateFailed))
		eng.ResetLow()
		lb.Targets[3] = lbrecon.Target{Name: "node9", Address: netip.MustParseAddr("10.0.0.99")}
		require.NoError(t, r.SetLoadBalancer(lb))
		require.NoError(t, r.Reconcile(t.Context()))
		low := eng.Low(lbrecon.KindServer)
		require.GreaterOrEqual(t, low[ids["p1.svc-1"]], 4, "backend p1 fell below min(old, new) while p0 was recreated")
		requireConverged(t, eng, r, lb)
	})
}

func TestFailedParentRecreatedWithReferencesRespected(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		eng := realistic(nil)
		eng.TurnFailed(func(o lbrecon.Object) bool { return o.Kind == lbrecon.KindBackend && o.Name == "p0.svc-1" }, 1)
		lb := desc(2, 2, 3)
		var o outcomes
		r := newLB(t, eng, lb, o.hook)
		require.NoError(t, r.Reconcile(t.Context()))
		require.Zero(t, o.get("destroy/conflict"), "no parent destroyed while in use")
		require.Zero(t, o.get("create/conflict"), "no child created under a missing parent")
		requireConverged(t, eng, r, lb)
	})
}

func TestStuckObjectDoesNotBlockOtherWorkOrTeardown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		eng := newEngine(lbrecontest.Config{})
		lb := desc(2, 1, 2)
		r := newLB(t, eng, lb, nil)
		require.NoError(t, r.Reconcile(t.Context()))
		// A server stuck pending forever.
		var stuck lbrecon.Object
		for _, o := range eng.Objects() {
			if o.Kind == lbrecon.KindServer {
				stuck = o
				break
			}
		}
		require.True(t, eng.SetObjectState(stuck.Key(), lbrecon.StatePending))

		lb.Targets = append(lb.Targets, lbrecon.Target{Name: "node7", Address: netip.MustParseAddr("10.0.0.77")})
		var mu sync.Mutex
		var created time.Time
		r = newLB(t, eng, lb, func(c *lbrecon.Config) {
			c.PendingTimeout = time.Minute
			c.Metrics = lbrecon.MetricsFunc(func(v lbrecon.Verb, o lbrecon.Outcome, _ time.Duration) {
				mu.Lock()
				defer mu.Unlock()
				if v == lbrecon.VerbCreate && o == lbrecon.OutcomeOK {
					created = time.Now()
				}
			})
		})
		eng.ResetCalls()
		start := time.Now()
		err := r.Reconcile(t.Context())
		require.ErrorIs(t, err, lbrecon.ErrPendingTimeout)
		require.Contains(t, err.Error(), stuck.ID)
		took := time.Since(start)
		require.GreaterOrEqual(t, took, time.Minute)
		require.Less(t, took, time.Minute+2*lbrecon.DefaultMaxPollInterval)
		require.Equal(t, 2, eng.Calls()[lbrecon.VerbCreate])
		mu.Lock()
		require.Less(t, created.Sub(start), time.Second, "the new servers were created at once, not after the stuck one")
		mu.Unlock()

		lb.Ports = nil
		r = newLB(t, eng, lb, nil)
		require.NoError(t, r.Reconcile(t.Context()), "teardown is not blocked")
		require.Empty(t, eng.Objects())
	})
}

func TestFailureBudgetAcrossCalls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		eng := newEngine(lbrecontest.Config{})
		eng.TurnFailed(isServer("node0"), -1)
		r := newLB(t, eng, desc(1, 1, 1), func(c *lbrecon.Config) { c.FailureBudget = 2 })
		require.ErrorIs(t, r.Reconcile(t.Context()), lbrecon.ErrResourceFailed)
		require.Equal(t, 2, eng.Calls()[lbrecon.VerbDestroy])
		for range 3 {
			eng.ResetCalls()
			require.ErrorIs(t, r.Reconcile(t.Context()), lbrecon.ErrResourceFailed)
			require.Zero(t, eng.Calls()[lbrecon.VerbCreate]+eng.Calls()[lbrecon.VerbDestroy], "the budget is not renewed by a new call")
		}
		r.ResetFailures()
		eng.ResetCalls()
		require.ErrorIs(t, r.Reconcile(t.Context()), lbrecon.ErrResourceFailed)
		require.Equal(t, 2, eng.Calls()[lbrecon.VerbDestroy], "ResetFailures renews it")
	})
}

func TestUniqueNamesConflictResolved(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		eng := realistic(func(c *lbrecontest.Config) { c.UniqueNames, c.NoUpdate = true, true })
		lb := desc(1, 1, 3)
		r := newLB(t, eng, lb, nil)
		require.NoError(t, r.Reconcile(t.Context()))
		lb.Ports[0].NodePort = 31000
		r = newLB(t, eng, lb, nil)
		require.NoError(t, r.Reconcile(t.Context()), "a taken name is looked at again, its old object destroyed first")
		requireConverged(t, eng, r, lb)
	})
}

func TestUnsupportedRepairIsNotAnError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		eng := newEngine(lbrecontest.Config{}) // Repair returns ErrNotSupported
		eng.TurnFailed(isServer("node0"), 1)
		var o outcomes
		lb := desc(1, 1, 1)
		r := newLB(t, eng, lb, o.hook)
		require.NoError(t, r.Reconcile(t.Context()))
		require.Equal(t, 1, o.get("repair/not_supported"))
		require.Zero(t, o.get("repair/permanent"))
		requireConverged(t, eng, r, lb)
	})
}

func TestTimeoutsReportedAsTimeouts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		eng := newEngine(lbrecontest.Config{})
		eng.FailCreate(nil, 1, context.DeadlineExceeded)
		var o outcomes
		r := newLB(t, eng, desc(1, 1, 1), func(c *lbrecon.Config) {
			o.hook(c)
			c.ConfirmTimeout = 10 * time.Second
		})
		require.NoError(t, r.Reconcile(t.Context()))
		require.Equal(t, 1, o.get("create/timeout"))
		require.Zero(t, o.get("create/canceled"))
	})
}

func TestUntaggedObjectsNeverDestroyedAndAdoptedOnlyExactly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		eng := newEngine(lbrecontest.Config{})
		lb := desc(1, 1, 1)
		r := newLB(t, eng, lb, nil)
		require.NoError(t, r.Reconcile(t.Context()))
		var backend lbrecon.Object
		for _, o := range eng.Objects() {
			if o.Kind == lbrecon.KindBackend {
				backend = o
			}
		}
		server := func(name, addr string) lbrecon.Object {
			return eng.Put(lbrecon.Object{Kind: lbrecon.KindServer, Name: name,
				Spec: lbrecon.ServerSpec{Backend: backend.ID, Address: netip.MustParseAddr(addr), Port: 30000}})
		}
		// Untagged servers under our backend whose names end like ours: a
		// dotted suffix of another owner, a hand-made one, and one with the
		// exact name of a server the plan is about to want, but another spec.
		foreign := []lbrecon.Object{
			server("node0.p0.team.svc-1", "10.1.0.1"),
			server("debug.svc-1", "10.1.0.2"),
			server("node1.p0.svc-1", "10.9.9.9"),
		}
		lb.Targets = append(lb.Targets, lbrecon.Target{Name: "node1", Address: netip.MustParseAddr("10.0.0.2")})
		r = newLB(t, eng, lb, nil)
		eng.ResetCalls()
		require.NoError(t, r.Reconcile(t.Context()))
		require.Zero(t, eng.Calls()[lbrecon.VerbDestroy])
		require.Zero(t, eng.Calls()[lbrecon.VerbTag], "no adoption without an exact spec")
		require.Equal(t, 1, eng.Calls()[lbrecon.VerbCreate])
		left := untaggedObjects(eng)
		require.Len(t, left, len(foreign))
		for i := range foreign {
			require.Equal(t, foreign[i].ID, left[i].ID)
		}

		// Teardown leaves them too.
		lb.Ports = nil
		r = newLB(t, eng, lb, nil)
		require.NoError(t, r.Reconcile(t.Context()))
		require.Len(t, untaggedObjects(eng), len(foreign))
	})
}

func TestProviderDefaultsDoNotRecreate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// The provider fills a server's weight when none is asked for.
		eng := newEngine(lbrecontest.Config{Default: func(spec any) any {
			if s, ok := spec.(lbrecon.ServerSpec); ok && s.Weight == 0 {
				s.Weight = 1
				return s
			}
			return spec
		}})
		lb := desc(1, 1, 3)
		r := newLB(t, eng, lb, nil)
		require.NoError(t, r.Reconcile(t.Context()))
		eng.ResetCalls()
		require.NoError(t, r.Reconcile(t.Context()))
		require.Equal(t, map[lbrecon.Verb]int{lbrecon.VerbList: 1}, eng.Calls(), "a defaulted field is no difference")
		requireConverged(t, eng, r, lb)
	})
}

func TestSetLoadBalancerKeepsTheMemory(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		eng := realistic(nil)
		lb := desc(1, 1, 2)
		r := newLB(t, eng, lb, nil)
		// One pass, then a new description before the listing shows the
		// first writes: nothing is created twice.
		_, err := r.ReconcileOnce(t.Context())
		require.NoError(t, err)
		lb.Targets = append(lb.Targets, lbrecon.Target{Name: "node5", Address: netip.MustParseAddr("10.0.0.55")})
		require.NoError(t, r.SetLoadBalancer(lb))
		require.NoError(t, r.Reconcile(t.Context()))
		require.Equal(t, objectCount(lb), eng.Calls()[lbrecon.VerbCreate])
		requireConverged(t, eng, r, lb)

		other := lb
		other.ID = "lb-2"
		require.ErrorIs(t, r.SetLoadBalancer(other), lbrecon.ErrInvalidConfig)
	})
}

// listing wraps an engine to change what List answers.
type listing struct {
	*lbrecontest.Engine
	edit func([]lbrecon.Object) []lbrecon.Object
}

func (l listing) List(ctx context.Context, q lbrecon.Query) ([]lbrecon.Object, error) {
	objs, err := l.Engine.List(ctx, q)
	if err != nil {
		return nil, err
	}
	return l.edit(objs), nil
}

func TestInconsistentAnswersChangeNothing(t *testing.T) {
	for name, edit := range map[string]func([]lbrecon.Object) []lbrecon.Object{
		"one kind and ID twice": func(objs []lbrecon.Object) []lbrecon.Object { return append(objs, objs[0]) },
		"a parent missing": func(objs []lbrecon.Object) []lbrecon.Object {
			var out []lbrecon.Object
			for _, o := range objs {
				if o.Kind != lbrecon.KindBackend {
					out = append(out, o)
				}
			}
			return out
		},
		"an object without ID": func(objs []lbrecon.Object) []lbrecon.Object {
			objs[0].ID = ""
			return objs
		},
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				eng := newEngine(lbrecontest.Config{})
				lb := desc(2, 1, 2)
				require.NoError(t, newLB(t, eng, lb, nil).Reconcile(t.Context()))
				lb.Ports = lb.Ports[:1] // something to destroy, were the answer trusted
				r := newLB(t, listing{Engine: eng, edit: edit}, lb, nil)
				eng.ResetCalls()
				require.ErrorIs(t, r.Reconcile(t.Context()), lbrecon.ErrInconsistent)
				require.Equal(t, map[lbrecon.Verb]int{lbrecon.VerbList: 1}, eng.Calls(), "nothing changed")
			})
		})
	}
}

func TestUnconfirmedWritesExpire(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// A created object that no listing ever shows is taken as lost
		// after ConfirmTimeout and created again.
		eng := newEngine(lbrecontest.Config{})
		hidden := ""
		r := newLB(t, listing{Engine: eng, edit: func(objs []lbrecon.Object) []lbrecon.Object {
			var out []lbrecon.Object
			for _, o := range objs {
				if o.Kind == lbrecon.KindBackend && hidden == "" {
					hidden = o.ID
					eng.DeleteObject(o.Key()) // lost by the provider
					continue
				}
				out = append(out, o)
			}
			return out
		}}, desc(1, 1, 1), func(c *lbrecon.Config) { c.ConfirmTimeout = 20 * time.Second })
		start := time.Now()
		require.NoError(t, r.Reconcile(t.Context()))
		require.NotEmpty(t, hidden)
		require.Equal(t, 4+1, eng.Calls()[lbrecon.VerbCreate])
		took := time.Since(start)
		require.GreaterOrEqual(t, took, 20*time.Second, "waited for the listing up to ConfirmTimeout")
		require.Less(t, took, 40*time.Second)
	})
}

func TestIdentifiersUniquePerKindOnly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// Backend id-000001 and server id-000001 are different objects.
		eng := realistic(func(c *lbrecontest.Config) { c.IDsPerKind = true })
		eng.TurnFailed(func(o lbrecon.Object) bool { return o.Kind == lbrecon.KindBackend && o.Name == "p1.svc-1" }, 1)
		lb := desc(2, 2, 3)
		r := newLB(t, eng, lb, nil)
		require.NoError(t, r.Reconcile(t.Context()))
		requireConverged(t, eng, r, lb)
		ids := map[string]int{}
		for _, o := range eng.Objects() {
			ids[o.ID]++
		}
		require.Greater(t, ids["id-000001"], 1, "the model shares identifiers across kinds")

		lb.Ports[0].NodePort = 31000
		lb.Targets = lb.Targets[1:]
		require.NoError(t, r.SetLoadBalancer(lb))
		require.NoError(t, r.Reconcile(t.Context()))
		requireConverged(t, eng, r, lb)

		lb.Ports = nil
		require.NoError(t, r.SetLoadBalancer(lb))
		require.NoError(t, r.Reconcile(t.Context()))
		require.Empty(t, eng.Objects())
	})
}

func TestGuardChecksEveryWriteAndForwardsOptionalCalls(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		eng := newEngine(lbrecontest.Config{Repair: true})
		eng.TurnFailed(isServer("node0"), 1)
		var mu sync.Mutex
		checked := map[lbrecon.Verb]int{}
		refuse := false
		errStale := backoff.Permanent(errors.New("stale fencing token"))
		guard := func(_ context.Context, v lbrecon.Verb, _ lbrecon.Object) error {
			mu.Lock()
			defer mu.Unlock()
			checked[v]++
			if refuse {
				return errStale
			}
			return nil
		}
		lb := desc(1, 1, 2)
		r := newLB(t, lbrecon.Guard(eng, guard), lb, nil)
		require.NoError(t, r.Reconcile(t.Context()))
		require.Equal(t, 1, eng.Calls()[lbrecon.VerbRepair], "Repair forwarded")
		lb.Ports[0].NodePort = 31000
		require.NoError(t, r.SetLoadBalancer(lb))
		require.NoError(t, r.Reconcile(t.Context()))
		require.Equal(t, 2, eng.Calls()[lbrecon.VerbUpdate], "Update forwarded")
		mu.Lock()
		// Five creations, the first one offered with an idempotency token
		// first, which the engine declined: the check ran before each of
		// the six attempts.
		require.Equal(t, map[lbrecon.Verb]int{lbrecon.VerbCreate: 6, lbrecon.VerbRepair: 1, lbrecon.VerbUpdate: 2}, checked)
		refuse = true
		mu.Unlock()

		lb.Ports = nil
		require.NoError(t, r.SetLoadBalancer(lb))
		eng.ResetCalls()
		require.ErrorIs(t, r.Reconcile(t.Context()), errStale)
		require.Zero(t, eng.Calls()[lbrecon.VerbDestroy], "a refused write never reaches the engine")

		// Without the optional interfaces, the reconciler falls back.
		plain := struct{ lbrecon.Engine }{newEngine(lbrecontest.Config{})}
		g := lbrecon.Guard(plain, func(context.Context, lbrecon.Verb, lbrecon.Object) error { return nil })
		_, err := g.(lbrecon.Updater).Update(t.Context(), lbrecon.Object{}, lbrecon.Object{})
		require.ErrorIs(t, err, lbrecon.ErrNotSupported)
		_, err = g.(lbrecon.Repairer).Repair(t.Context(), lbrecon.Object{})
		require.ErrorIs(t, err, lbrecon.ErrNotSupported)
	})
}
