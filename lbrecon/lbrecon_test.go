package lbrecon_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/reconkit/reconkit/backoff"
	"github.com/reconkit/reconkit/lbrecon"
	"github.com/reconkit/reconkit/lbrecon/lbrecontest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const owner = "owner=svc-1"

// desc returns a load balancer with the given numbers of ports, external
// addresses and targets.
func desc(ports, addrs, targets int) lbrecon.LoadBalancer {
	lb := lbrecon.LoadBalancer{ID: "lb-1", Suffix: "svc-1"}
	for i := range ports {
		lb.Ports = append(lb.Ports, lbrecon.Port{Name: fmt.Sprintf("p%d", i), NodePort: uint16(30000 + i), ExternalPort: uint16(80 + i)})
	}
	for i := range addrs {
		lb.Addresses = append(lb.Addresses, netip.AddrFrom4([4]byte{192, 0, 2, byte(1 + i)}))
	}
	for i := range targets {
		lb.Targets = append(lb.Targets, lbrecon.Target{Name: fmt.Sprintf("node%d", i), Address: netip.AddrFrom4([4]byte{10, 0, 0, byte(1 + i)})})
	}
	return lb
}

func newEngine(cfg lbrecontest.Config) *lbrecontest.Engine {
	if cfg.Latency == 0 {
		cfg.Latency = 20 * time.Millisecond
	}
	if cfg.Pending == 0 {
		cfg.Pending = time.Second
	}
	return lbrecontest.New(cfg)
}

func newLB(t *testing.T, eng lbrecon.Engine, lb lbrecon.LoadBalancer, mod func(*lbrecon.Config)) *lbrecon.LoadBalancerReconciler {
	t.Helper()
	cfg := lbrecon.Config{Engine: eng, Tag: owner, Journal: lbrecon.NoJournal}
	if mod != nil {
		mod(&cfg)
	}
	r, err := lbrecon.NewLoadBalancer(cfg, lb)
	require.NoError(t, err)
	return r
}

// requireConverged checks that the engine holds exactly the objects lb
// describes, all ok and tagged, and that Check plans nothing.
func requireConverged(t *testing.T, eng *lbrecontest.Engine, r *lbrecon.LoadBalancerReconciler, lb lbrecon.LoadBalancer) {
	t.Helper()
	ctx := context.Background()
	p, err := r.Check(ctx)
	require.NoError(t, err)
	require.True(t, p.Empty(), "plan not empty: %+v", p)
	// A reconciler without memory of the writes sees the same in a
	// listing: the state is confirmed, not remembered.
	fresh, err := lbrecon.NewLoadBalancer(lbrecon.Config{Engine: eng, Tag: owner, Journal: lbrecon.NoJournal}, lb)
	require.NoError(t, err)
	p, err = fresh.Check(ctx)
	require.NoError(t, err)
	require.True(t, p.Empty(), "a listing does not confirm the state: %+v", p)

	counts := map[string]int{}
	for _, o := range eng.Objects() {
		if !strings.HasSuffix(o.Name, "."+lb.Suffix) {
			continue
		}
		counts[o.Kind]++
		require.Equal(t, lbrecon.StateOK, o.State, "%v", o)
		require.True(t, o.HasTag(owner), "%v untagged", o)
	}
	if lb.Provision {
		// The counts and the address come from the provider: the model's
		// own check says whether every object is there.
		require.True(t, lbrecontest.Converged(lb, owner)(eng.Objects()), "%v", eng.Objects())
		return
	}
	np, na, nt := len(lb.Ports), len(lb.Addresses), len(lb.Targets)
	want := map[string]int{}
	for k, n := range map[string]int{lbrecon.KindBackend: np, lbrecon.KindFrontend: np, lbrecon.KindBind: np * na, lbrecon.KindServer: np * nt} {
		if n > 0 {
			want[k] = n
		}
	}
	require.Equal(t, want, counts)

	st, err := r.Status(ctx)
	require.NoError(t, err)
	wantSt := map[netip.Addr][]uint16{}
	for _, a := range lb.Addresses {
		for _, p := range lb.Ports {
			wantSt[a] = append(wantSt[a], p.ExternalPort)
		}
		slices.Sort(wantSt[a]) // Status sorts the ports
	}
	require.Equal(t, wantSt, st)
}

func TestConvergeFromEmpty(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		eng := newEngine(lbrecontest.Config{})
		lb := desc(2, 2, 3)
		r := newLB(t, eng, lb, nil)
		require.NoError(t, r.Reconcile(t.Context()))
		calls := eng.Calls()
		require.Equal(t, 2+2+4+6, calls[lbrecon.VerbCreate], "one create per object")
		require.Zero(t, calls[lbrecon.VerbDestroy])
		require.Zero(t, calls[lbrecon.VerbTag], "tags are applied at creation")
		requireConverged(t, eng, r, lb)
	})
}

func TestCheckPlansWaveByWave(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		eng := newEngine(lbrecontest.Config{})
		lb := desc(2, 1, 1)
		r := newLB(t, eng, lb, nil)
		p, err := r.Check(t.Context())
		require.NoError(t, err)
		require.Len(t, p.Create, 2)
		for _, c := range p.Create {
			require.Equal(t, lbrecon.KindBackend, c.Kind)
			require.Equal(t, []string{owner}, c.Tags)
		}
		require.Equal(t, map[lbrecon.Verb]int{lbrecon.VerbList: 1}, eng.Calls(), "Check only lists")

		for _, o := range p.Create {
			o.State = lbrecon.StateOK
			eng.Put(o)
		}
		// The load-balancer plan creates servers alongside frontends.
		pl, err := r.Check(t.Context())
		require.NoError(t, err)
		kinds := map[string]int{}
		for _, c := range pl.Create {
			kinds[c.Kind]++
		}
		require.Equal(t, map[string]int{lbrecon.KindFrontend: 2, lbrecon.KindServer: 2}, kinds)
	})
}

func TestConvergeFromPartial(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		eng := newEngine(lbrecontest.Config{})
		small := desc(1, 1, 2)
		require.NoError(t, newLB(t, eng, small, nil).Reconcile(t.Context()))
		before := len(eng.Objects())

		big := desc(3, 2, 4)
		r := newLB(t, eng, big, nil)
		eng.ResetCalls()
		require.NoError(t, r.Reconcile(t.Context()))
		requireConverged(t, eng, r, big)
		require.Equal(t, len(eng.Objects())-before, eng.Calls()[lbrecon.VerbCreate], "existing objects are kept")
		require.Zero(t, eng.Calls()[lbrecon.VerbDestroy])
	})
}

func TestDriftBindDeletedOutside(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		eng := newEngine(lbrecontest.Config{})
		lb := desc(2, 2, 2)
		r := newLB(t, eng, lb, nil)
		require.NoError(t, r.Reconcile(t.Context()))

		var bind lbrecon.Object
		for _, o := range eng.Objects() {
			if o.Kind == lbrecon.KindBind {
				bind = o
				break
			}
		}
		require.True(t, eng.DeleteObject(bind.Key()))
		st, err := r.Status(t.Context())
		require.NoError(t, err)
		require.Len(t, st[bind.Spec.(lbrecon.BindSpec).Address], 1, "status reflects current binds")

		p, err := r.Check(t.Context())
		require.NoError(t, err)
		require.Len(t, p.Create, 1)
		require.Equal(t, bind.Name, p.Create[0].Name)
		require.Empty(t, p.Destroy)

		eng.ResetCalls()
		require.NoError(t, r.Reconcile(t.Context()))
		require.Equal(t, 1, eng.Calls()[lbrecon.VerbCreate])
		requireConverged(t, eng, r, lb)
	})
}

func TestPortsRemoved(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		eng := newEngine(lbrecontest.Config{})
		lb := desc(3, 2, 2)
		require.NoError(t, newLB(t, eng, lb, nil).Reconcile(t.Context()))

		lb.Ports = lb.Ports[:1]
		r := newLB(t, eng, lb, nil)
		p, err := r.Check(t.Context())
		require.NoError(t, err)
		require.Empty(t, p.Create)
		// Children go first; parents wait until a listing shows them gone.
		require.Len(t, p.Destroy, 2*(2+2))
		for _, d := range p.Destroy {
			require.Contains(t, []string{lbrecon.KindServer, lbrecon.KindBind}, d.Kind)
		}
		require.Len(t, p.Deferred, 2*(1+1))
		for _, d := range p.Deferred {
			require.Contains(t, []string{lbrecon.KindFrontend, lbrecon.KindBackend}, d.Kind)
		}

		eng.ResetCalls()
		require.NoError(t, r.Reconcile(t.Context()))
		require.Equal(t, 12, eng.Calls()[lbrecon.VerbDestroy])
		require.Zero(t, eng.Calls()[lbrecon.VerbCreate])
		requireConverged(t, eng, r, lb)
	})
}

func TestTargetChanged(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		eng := newEngine(lbrecontest.Config{})
		lb := desc(2, 1, 3)
		require.NoError(t, newLB(t, eng, lb, nil).Reconcile(t.Context()))
		lb.Targets[1].Address = netip.MustParseAddr("10.9.9.9")
		r := newLB(t, eng, lb, nil)
		eng.ResetCalls()
		require.NoError(t, r.Reconcile(t.Context()))
		require.Equal(t, 2, eng.Calls()[lbrecon.VerbDestroy], "the changed server in each backend")
		require.Equal(t, 2, eng.Calls()[lbrecon.VerbCreate])
		requireConverged(t, eng, r, lb)
	})
}

func isServer(name string) func(lbrecon.Object) bool {
	return func(o lbrecon.Object) bool {
		return o.Kind == lbrecon.KindServer && strings.HasPrefix(o.Name, name+".")
	}
}

func TestFailedResourceRepairedInPlace(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		eng := newEngine(lbrecontest.Config{Repair: true})
		eng.TurnFailed(isServer("node1"), 1)
		lb := desc(1, 1, 2)
		r := newLB(t, eng, lb, nil)
		require.NoError(t, r.Reconcile(t.Context()))
		calls := eng.Calls()
		require.Equal(t, 1, calls[lbrecon.VerbRepair])
		require.Zero(t, calls[lbrecon.VerbDestroy], "repaired, not recreated")
		requireConverged(t, eng, r, lb)
	})
}

func TestFailedResourceRecreated(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		eng := newEngine(lbrecontest.Config{})
		eng.TurnFailed(isServer("node1"), 2)
		lb := desc(1, 1, 2)
		r := newLB(t, eng, lb, nil)
		require.NoError(t, r.Reconcile(t.Context()))
		calls := eng.Calls()
		require.Equal(t, 2, calls[lbrecon.VerbDestroy], "recreated twice")
		require.Equal(t, 1+1+1+2+2, calls[lbrecon.VerbCreate])
		requireConverged(t, eng, r, lb)
	})
}

func TestResourceThatAlwaysFails(t *testing.T) {
	for _, repair := range []bool{false, true} {
		t.Run(fmt.Sprintf("repair=%v", repair), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				eng := newEngine(lbrecontest.Config{Repair: repair})
				eng.TurnFailed(isServer("node0"), -1)
				r := newLB(t, eng, desc(1, 1, 1), func(c *lbrecon.Config) { c.FailureBudget = 3 })
				err := r.Reconcile(t.Context())
				require.ErrorIs(t, err, lbrecon.ErrResourceFailed)
				require.Contains(t, err.Error(), "node0.p0.svc-1")
				calls := eng.Calls()
				if repair {
					require.Equal(t, 1, calls[lbrecon.VerbRepair])
					require.Equal(t, 2, calls[lbrecon.VerbDestroy])
				} else {
					require.Equal(t, 3, calls[lbrecon.VerbDestroy])
				}
				require.Equal(t, 3+1+calls[lbrecon.VerbDestroy], calls[lbrecon.VerbCreate], "bounded recreations")
			})
		})
	}
}

func TestPendingExistingObjectsAreWaitedFor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		eng := newEngine(lbrecontest.Config{Pending: 5 * time.Second})
		lb := desc(1, 1, 1)
		r := newLB(t, eng, lb, nil)
		// Created by an earlier run that ended while they were pending.
		p, err := r.Check(t.Context())
		require.NoError(t, err)
		require.Len(t, p.Create, 1)
		readyAt := time.Now().Add(20*time.Millisecond + 5*time.Second) // latency, then the pending period
		for _, o := range p.Create {
			_, err := eng.Create(t.Context(), o)
			require.NoError(t, err)
		}
		p, err = r.Check(t.Context())
		require.NoError(t, err)
		require.Len(t, p.Pending, 1)
		var mu sync.Mutex
		var firstCreate time.Time
		r = newLB(t, eng, lb, func(c *lbrecon.Config) {
			c.Metrics = lbrecon.MetricsFunc(func(v lbrecon.Verb, _ lbrecon.Outcome, d time.Duration) {
				mu.Lock()
				defer mu.Unlock()
				if v == lbrecon.VerbCreate && firstCreate.IsZero() {
					firstCreate = time.Now().Add(-d)
				}
			})
		})
		require.NoError(t, r.Reconcile(t.Context()))
		requireConverged(t, eng, r, lb)
		mu.Lock()
		defer mu.Unlock()
		// Nothing is created before the backend is ok, and the wait ends
		// within one poll interval (at most MaxPollInterval) of it.
		require.False(t, firstCreate.Before(readyAt), "created at %v, before the backend was ready at %v", firstCreate, readyAt)
		require.LessOrEqual(t, firstCreate.Sub(readyAt), lbrecon.DefaultMaxPollInterval)
	})
}

// TestPendingTimeoutOnFakeClock drives the injected fake clock: an object
// that stays pending ends the wait after PendingTimeout.
func TestPendingTimeoutOnFakeClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fc := clocktesting.NewFakeClock(time.Unix(1000, 0))
		eng := lbrecontest.New(lbrecontest.Config{Clock: fc, Latency: 10 * time.Millisecond})
		lb := desc(1, 1, 1)
		stuck := eng.Put(lbrecon.Object{Kind: lbrecon.KindBackend, Name: "p0.svc-1", Tags: []string{owner},
			Spec: lbrecon.BackendSpec{LoadBalancer: "lb-1"}, State: lbrecon.StatePending})
		r := newLB(t, eng, lb, func(c *lbrecon.Config) {
			c.Clock = fc
			c.PendingTimeout = time.Minute
		})
		done := make(chan error, 1)
		go func() { done <- r.Reconcile(t.Context()) }()
		var err error
		for finished := false; !finished; {
			synctest.Wait()
			select {
			case err = <-done:
				finished = true
			default:
				require.True(t, fc.HasWaiters())
				fc.Step(100 * time.Millisecond)
			}
		}
		require.ErrorIs(t, err, lbrecon.ErrPendingTimeout)
		require.Contains(t, err.Error(), stuck.ID)
		// Ended at the timeout, not before and not much after: one List,
		// one poll interval, the timeout, one Get and one clock step.
		elapsed := fc.Since(time.Unix(1000, 0))
		require.GreaterOrEqual(t, elapsed, time.Minute)
		require.LessOrEqual(t, elapsed, time.Minute+time.Second)
		require.Greater(t, eng.Calls()[lbrecon.VerbGet], 3, "polled with gets")
	})
}

// crashAfterCreate returns a context and a Config modifier: the context is
// cancelled as soon as a Create call ends with an error, as if the process
// had died right after it.
func crashAfterCreate(t *testing.T) (context.Context, func(*lbrecon.Config)) {
	ctx, cancel := context.WithCancel(t.Context())
	t.Cleanup(cancel)
	return ctx, func(c *lbrecon.Config) {
		c.Metrics = lbrecon.MetricsFunc(func(v lbrecon.Verb, o lbrecon.Outcome, _ time.Duration) {
			if v == lbrecon.VerbCreate && o != lbrecon.OutcomeOK {
				cancel()
			}
		})
	}
}

func untaggedObjects(eng *lbrecontest.Engine) []lbrecon.Object {
	var out []lbrecon.Object
	for _, o := range eng.Objects() {
		if len(o.Tags) == 0 {
			out = append(out, o)
		}
	}
	return out
}

func TestCrashBetweenCreateAndTag(t *testing.T) {
	t.Run("adopted by exact name", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			eng := newEngine(lbrecontest.Config{})
			eng.CrashBeforeTag(isServer("node1"), 1)
			lb := desc(1, 1, 2)
			ctx, crash := crashAfterCreate(t)
			err := newLB(t, eng, lb, crash).Reconcile(ctx)
			require.ErrorIs(t, err, context.Canceled)
			untagged := untaggedObjects(eng)
			require.Len(t, untagged, 1)
			require.True(t, isServer("node1")(untagged[0]), "the crash between create and tag came at server node1: %v", untagged[0])

			// A new process, with no memory of the create, finds the
			// object by its exact name and spec.
			r := newLB(t, eng, lb, nil)
			p, err := r.Check(t.Context())
			require.NoError(t, err)
			require.Len(t, p.Adopt, 1)
			require.Equal(t, untagged[0].ID, p.Adopt[0].ID)
			eng.ResetCalls()
			require.NoError(t, r.Reconcile(t.Context()))
			require.Equal(t, 1, eng.Calls()[lbrecon.VerbTag])
			require.Equal(t, 1, eng.Calls()[lbrecon.VerbCreate], "only the bind the first run never reached")
			require.Zero(t, eng.Calls()[lbrecon.VerbDestroy])
			requireConverged(t, eng, r, lb)
		})
	})
	t.Run("never destroyed when no longer desired", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			eng := newEngine(lbrecontest.Config{})
			eng.CrashBeforeTag(isServer("node1"), 1)
			lb := desc(1, 1, 2)
			ctx, crash := crashAfterCreate(t)
			require.Error(t, newLB(t, eng, lb, crash).Reconcile(ctx))
			leftover := untaggedObjects(eng)
			require.Len(t, leftover, 1)
			require.True(t, isServer("node1")(leftover[0]), "the crash between create and tag came at server node1: %v", leftover[0])
			lb.Targets = lb.Targets[:1]
			r := newLB(t, eng, lb, nil)
			eng.ResetCalls()
			require.NoError(t, r.Reconcile(t.Context()))
			require.Zero(t, eng.Calls()[lbrecon.VerbDestroy], "an untagged object is never destroyed")
			require.Zero(t, eng.Calls()[lbrecon.VerbTag], "nor adopted when no creation wants its name")
			after := untaggedObjects(eng)
			require.Len(t, after, 1)
			require.Equal(t, leftover[0].ID, after[0].ID)
		})
	})
	t.Run("resolved within one run", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			eng := newEngine(lbrecontest.Config{})
			eng.CrashBeforeTag(isServer("node1"), 1)
			lb := desc(1, 1, 2)
			r := newLB(t, eng, lb, nil)
			require.NoError(t, r.Reconcile(t.Context()))
			requireConverged(t, eng, r, lb)
			require.Empty(t, untaggedObjects(eng), "adopted")
			require.Equal(t, 1+1+1+2, eng.Calls()[lbrecon.VerbCreate], "the intent held the name: no second create")
		})
	})
}

func TestCancellationEndsPromptly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		eng := newEngine(lbrecontest.Config{Latency: 50 * time.Millisecond, Pending: 10 * time.Second})
		r := newLB(t, eng, desc(4, 2, 50), nil)
		ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
		defer cancel()
		start := time.Now()
		err := r.Reconcile(ctx)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.Equal(t, 3*time.Second, time.Since(start), "returned as the context ended")
	})
}

func TestCancellationDuringCreates(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		eng := newEngine(lbrecontest.Config{Latency: time.Second, Pending: time.Millisecond})
		r := newLB(t, eng, desc(4, 2, 50), func(c *lbrecon.Config) { c.Parallelism = 4 })
		ctx, cancel := context.WithTimeout(t.Context(), 4500*time.Millisecond)
		defer cancel()
		start := time.Now()
		err := r.Reconcile(ctx)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.Equal(t, 4500*time.Millisecond, time.Since(start))
	})
}

func TestRateLimitHonoured(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		eng := newEngine(lbrecontest.Config{})
		eng.RateLimit(lbrecon.VerbList, 2, 7*time.Second)
		lb := desc(1, 1, 1)
		var mu sync.Mutex
		var listed time.Time
		r := newLB(t, eng, lb, func(c *lbrecon.Config) {
			c.Metrics = lbrecon.MetricsFunc(func(v lbrecon.Verb, o lbrecon.Outcome, _ time.Duration) {
				mu.Lock()
				defer mu.Unlock()
				if v == lbrecon.VerbList && o == lbrecon.OutcomeOK && listed.IsZero() {
					listed = time.Now()
				}
			})
		})
		start := time.Now()
		require.NoError(t, r.Reconcile(t.Context()))
		requireConverged(t, eng, r, lb)
		mu.Lock()
		defer mu.Unlock()
		// Two hinted waits of 7 s, jittered upwards by at most the retry
		// jitter (20%), and three calls of 20 ms.
		took := listed.Sub(start)
		require.GreaterOrEqual(t, took, 14*time.Second+60*time.Millisecond, "two retry-after waits")
		require.LessOrEqual(t, took, time.Duration(float64(14*time.Second)*(1+backoff.DefaultJitter))+60*time.Millisecond)
	})
}

func TestPermanentErrorNotRetried(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		eng := newEngine(lbrecontest.Config{})
		bad := errors.New("quota exceeded")
		eng.FailCreate(nil, -1, backoff.Permanent(bad))
		r := newLB(t, eng, desc(1, 1, 1), nil)
		err := r.Reconcile(t.Context())
		require.ErrorIs(t, err, bad)
		require.Equal(t, 1, eng.Calls()[lbrecon.VerbCreate])
	})
}

func TestTransientCreateErrorHoldsTheName(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		eng := newEngine(lbrecontest.Config{})
		// The create fails without creating: the name stays held until
		// ConfirmTimeout, then it is created once.
		eng.FailCreate(func(o lbrecon.Object) bool { return o.Kind == lbrecon.KindBackend }, 1, nil)
		lb := desc(1, 1, 1)
		r := newLB(t, eng, lb, func(c *lbrecon.Config) { c.ConfirmTimeout = 30 * time.Second })
		start := time.Now()
		require.NoError(t, r.Reconcile(t.Context()))
		require.Equal(t, 4+1, eng.Calls()[lbrecon.VerbCreate])
		took := time.Since(start)
		require.GreaterOrEqual(t, took, 30*time.Second, "the name was held for ConfirmTimeout")
		require.Less(t, took, 45*time.Second, "then three creation waves")
		requireConverged(t, eng, r, lb)

		// The create succeeds but its answer is lost: the listing shows
		// the object, and it is not created twice.
		eng2 := newEngine(lbrecontest.Config{})
		eng2.FailCreateAfter(func(o lbrecon.Object) bool { return o.Kind == lbrecon.KindBackend }, 1)
		r2 := newLB(t, eng2, lb, nil)
		require.NoError(t, r2.Reconcile(t.Context()))
		require.Equal(t, 4, eng2.Calls()[lbrecon.VerbCreate], "no duplicate")
		requireConverged(t, eng2, r2, lb)
	})
}

func TestTransientErrorsRetriedOnATimeBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		eng := newEngine(lbrecontest.Config{})
		// More failures than the old five quick attempts, with hints of 0.
		eng.RateLimit(lbrecon.VerbList, 12, 0)
		lb := desc(1, 1, 1)
		r := newLB(t, eng, lb, nil)
		require.NoError(t, r.Reconcile(t.Context()))
		requireConverged(t, eng, r, lb)

		eng.FailDestroy(nil, -1)
		lb.Ports = nil
		r = newLB(t, eng, lb, func(c *lbrecon.Config) { c.RetryBudget = 20 * time.Second })
		start := time.Now()
		err := r.Reconcile(t.Context())
		require.ErrorIs(t, err, lbrecon.ErrNotDestroyable)
		require.ErrorIs(t, err, lbrecontest.ErrInjected)
		require.ErrorIs(t, err, backoff.ErrGaveUp)
		// Retried on the budget, well past five quick attempts (about
		// 2.6 s), and given up when the next wait would exceed it.
		took := time.Since(start)
		require.GreaterOrEqual(t, took, 10*time.Second)
		require.LessOrEqual(t, took, 21*time.Second)
	})
}

func TestNothingTaggedError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		eng := newEngine(lbrecontest.Config{NothingTagged: true})
		lb := desc(2, 1, 2)
		r := newLB(t, eng, lb, nil)
		p, err := r.Check(t.Context())
		require.NoError(t, err)
		require.Len(t, p.Create, 2)
		require.NoError(t, r.Reconcile(t.Context()))
		requireConverged(t, eng, r, lb)
	})
}

func TestOtherOwnersAndLoadBalancersIgnored(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		eng := newEngine(lbrecontest.Config{})
		foreign := []lbrecon.Object{
			// Another owner's backend with a name like ours.
			{Kind: lbrecon.KindBackend, Name: "p0.svc-1", Tags: []string{"owner=svc-2"}, Spec: lbrecon.BackendSpec{LoadBalancer: "lb-1"}},
			// Our owner's backend on another load balancer.
			{Kind: lbrecon.KindBackend, Name: "p0.svc-1", Tags: []string{owner}, Spec: lbrecon.BackendSpec{LoadBalancer: "lb-2"}},
			// An untagged object whose name is not ours.
			{Kind: lbrecon.KindBackend, Name: "p0.other", Spec: lbrecon.BackendSpec{LoadBalancer: "lb-1"}},
		}
		for i := range foreign {
			foreign[i] = eng.Put(foreign[i])
		}
		// A server of our owner under the other load balancer's backend.
		eng.Put(lbrecon.Object{Kind: lbrecon.KindServer, Name: "node0.p0.svc-1", Tags: []string{owner},
			Spec: lbrecon.ServerSpec{Backend: foreign[1].ID, Address: netip.MustParseAddr("10.0.0.1"), Port: 1}})
		lb := desc(1, 1, 1)
		r := newLB(t, eng, lb, nil)
		require.NoError(t, r.Reconcile(t.Context()))
		require.Zero(t, eng.Calls()[lbrecon.VerbDestroy])
		require.Len(t, eng.Objects(), 4+4)
		p, err := r.Check(t.Context())
		require.NoError(t, err)
		require.True(t, p.Empty())
	})
}

func TestDuplicateIsAnInconsistentAnswer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		eng := newEngine(lbrecontest.Config{})
		lb := desc(1, 1, 1)
		r := newLB(t, eng, lb, nil)
		require.NoError(t, r.Reconcile(t.Context()))
		var srv lbrecon.Object
		for _, o := range eng.Objects() {
			if o.Kind == lbrecon.KindServer {
				srv = o
			}
		}
		srv.ID = ""
		eng.Put(srv)
		_, err := r.Check(t.Context())
		require.ErrorIs(t, err, lbrecon.ErrInconsistent)
		eng.ResetCalls()
		require.ErrorIs(t, r.Reconcile(t.Context()), lbrecon.ErrInconsistent)
		require.Equal(t, map[lbrecon.Verb]int{lbrecon.VerbList: 1}, eng.Calls(), "nothing changed")
	})
}

func TestMetricsHook(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		eng := newEngine(lbrecontest.Config{})
		eng.RateLimit(lbrecon.VerbCreate, 1, time.Second)
		var mu sync.Mutex
		seen := map[string]int{}
		var total time.Duration
		m := lbrecon.MetricsFunc(func(v lbrecon.Verb, o lbrecon.Outcome, d time.Duration) {
			mu.Lock()
			defer mu.Unlock()
			seen[string(v)+"/"+string(o)]++
			if v != lbrecon.VerbReconcile {
				total += d
			}
		})
		r := newLB(t, eng, desc(1, 1, 1), func(c *lbrecon.Config) { c.Metrics = m })
		require.NoError(t, r.Reconcile(t.Context()))
		mu.Lock()
		defer mu.Unlock()
		require.Equal(t, 1, seen["create/rate_limited"])
		require.Equal(t, 4, seen["create/ok"])
		require.Equal(t, 1, seen["reconcile/ok"])
		require.Equal(t, eng.TotalCalls(), seen["create/ok"]+seen["create/rate_limited"]+seen["list/ok"]+seen["get/ok"])
		require.Equal(t, time.Duration(eng.TotalCalls())*20*time.Millisecond, total)
	})
}

func TestNewRejectsBadConfig(t *testing.T) {
	eng := lbrecontest.New(lbrecontest.Config{})
	plan := func(context.Context, *lbrecon.Observation) (lbrecon.Changes, error) {
		return lbrecon.Changes{}, nil
	}
	good := func() lbrecon.Config {
		return lbrecon.Config{Engine: eng, Tag: owner, Journal: lbrecon.NoJournal, Steps: []lbrecon.Step{{Kind: "a", Plan: plan}, {Kind: "b", Plan: plan}}}
	}
	for name, mod := range map[string]func(*lbrecon.Config){
		"no engine":         func(c *lbrecon.Config) { c.Engine = nil },
		"no steps":          func(c *lbrecon.Config) { c.Steps = nil },
		"no tag":            func(c *lbrecon.Config) { c.Tag = "" },
		"tag without value": func(c *lbrecon.Config) { c.Tag = "owner" },
		"tag empty value":   func(c *lbrecon.Config) { c.Tag = "owner=" },
		"tag empty key":     func(c *lbrecon.Config) { c.Tag = "=svc-1" },
		"tag with space":    func(c *lbrecon.Config) { c.Tag = "owner=svc 1" },
		"duplicate kind":    func(c *lbrecon.Config) { c.Steps[1].Kind = "a" },
		"nil plan":          func(c *lbrecon.Config) { c.Steps[0].Plan = nil },
		"forward depends":   func(c *lbrecon.Config) { c.Steps[0].DependsOn = []string{"b"} },
		"unknown depends":   func(c *lbrecon.Config) { c.Steps[1].DependsOn = []string{"x"} },
		"negative parallel": func(c *lbrecon.Config) { c.Parallelism = -1 },
		"negative timeout":  func(c *lbrecon.Config) { c.PendingTimeout = -time.Second },
		"max below poll":    func(c *lbrecon.Config) { c.PollInterval, c.MaxPollInterval = time.Minute, time.Second },
		"no journal chosen": func(c *lbrecon.Config) { c.Journal = nil },
		"confirm below lag": func(c *lbrecon.Config) { c.ListLag, c.ConfirmTimeout = 3*time.Minute, time.Minute },
		"confirm at lag":    func(c *lbrecon.Config) { c.ListLag, c.ConfirmTimeout = time.Minute, time.Minute },
		"declared lag above confirm": func(c *lbrecon.Config) {
			c.Engine = lbrecontest.New(lbrecontest.Config{ListLag: time.Minute, DeclareListLag: true})
			c.ConfirmTimeout = 30 * time.Second
		},
	} {
		t.Run(name, func(t *testing.T) {
			cfg := good()
			mod(&cfg)
			_, err := lbrecon.New(cfg)
			require.ErrorIs(t, err, lbrecon.ErrInvalidConfig)
		})
	}
	_, err := lbrecon.New(good())
	require.NoError(t, err)

	for name, mod := range map[string]func(*lbrecon.LoadBalancer){
		"no id":          func(lb *lbrecon.LoadBalancer) { lb.ID = "" },
		"no suffix":      func(lb *lbrecon.LoadBalancer) { lb.Suffix = "" },
		"dotted port":    func(lb *lbrecon.LoadBalancer) { lb.Ports[0].Name = "a.b" },
		"same ext port":  func(lb *lbrecon.LoadBalancer) { lb.Ports[1].ExternalPort = lb.Ports[0].ExternalPort },
		"bad address":    func(lb *lbrecon.LoadBalancer) { lb.Addresses[0] = netip.Addr{} },
		"same target":    func(lb *lbrecon.LoadBalancer) { lb.Targets[1].Name = lb.Targets[0].Name },
		"zero node port": func(lb *lbrecon.LoadBalancer) { lb.Ports[0].NodePort = 0 },
	} {
		t.Run(name, func(t *testing.T) {
			lb := desc(2, 1, 2)
			mod(&lb)
			_, err := lbrecon.NewLoadBalancer(lbrecon.Config{Engine: eng, Tag: owner, Journal: lbrecon.NoJournal}, lb)
			require.ErrorIs(t, err, lbrecon.ErrInvalidConfig)
		})
	}
}

func TestDiff(t *testing.T) {
	obj := func(name, id string, s lbrecon.State, spec any) lbrecon.Object {
		return lbrecon.Object{Kind: "k", Name: name, ID: id, State: s, Spec: spec}
	}
	desired := []lbrecon.Object{obj("a", "", 0, 1), obj("b", "", 0, 2), obj("c", "", 0, []int{3})}
	observed := []lbrecon.Object{
		obj("a", "1", lbrecon.StateFailed, 1), obj("a", "2", lbrecon.StateOK, 1), // duplicate: keep the ok one
		obj("b", "3", lbrecon.StateOK, 9), // changed spec
		obj("c", "4", lbrecon.StateOK, []int{3}),
		obj("z", "5", lbrecon.StateOK, 1), // undesired
	}
	ch := lbrecon.Diff(desired, observed, nil)
	require.Equal(t, []lbrecon.Object{desired[1]}, ch.Create)
	require.Empty(t, ch.Update)
	ids := []string{}
	for _, d := range ch.Destroy {
		ids = append(ids, d.ID)
	}
	require.ElementsMatch(t, []string{"1", "3", "5"}, ids)
}

// A declared lag above the default ConfirmTimeout widens it: an
// acknowledged creation that the listings show only after 3 minutes is
// waited for, not made again.
func TestListLagAboveConfirmTimeoutWidensIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lag := 3 * time.Minute
		require.Greater(t, lag, lbrecon.DefaultConfirmTimeout)
		eng := newEngine(lbrecontest.Config{ListLag: lag, DeclareListLag: true})
		lb := desc(1, 1, 2)
		r := newLB(t, eng, lb, nil)
		require.NoError(t, r.Reconcile(t.Context()))
		require.Zero(t, duplicates(eng))
		require.Equal(t, objectCount(lb), eng.Calls()[lbrecon.VerbCreate], "one create per object")
		requireConverged(t, eng, r, lb)
	})
}
