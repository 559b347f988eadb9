package lbrecon_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/reconkit/reconkit/lbrecon"
	"github.com/reconkit/reconkit/lbrecon/lbrecontest"
)

// Tests of the one-pass mode's promises: it never waits on the clock, its
// retries are the host's requeues, and it never reports "not converged"
// without a time to call again or an error.

// once runs one ReconcileOnce (or TeardownOnce) on a fake clock that only
// the test moves, and fails the test if the call waits on the clock.
func once(t *testing.T, fc *clocktesting.FakeClock, call func(context.Context) (lbrecon.Result, error)) (lbrecon.Result, error) {
	t.Helper()
	type answer struct {
		res lbrecon.Result
		err error
	}
	done := make(chan answer, 1)
	go func() {
		res, err := call(t.Context())
		done <- answer{res, err}
	}()
	synctest.Wait()
	select {
	case a := <-done:
		return a.res, a.err
	default:
	}
	// Free the call, so the test ends, and report how long it held on.
	start := fc.Now()
	for {
		fc.Step(time.Second)
		synctest.Wait()
		select {
		case <-done:
			t.Fatalf("the call waited on the clock for %v", fc.Since(start))
		default:
		}
	}
}

// A provider that answers 503 to everything for 30 s: each call returns at
// once with a requeue, the requeues grow instead of spinning, and the load
// balancer converges once the provider is back, without duplicates.
func TestReconcileOnceUnavailableProviderReturnsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fc := clocktesting.NewFakeClock(time.Unix(1000, 0))
		eng := realistic(func(c *lbrecontest.Config) { c.Clock, c.Latency = fc, 0 })
		eng.Unavailable(30 * time.Second)
		lb := desc(2, 2, 3)
		r := newLB(t, eng, lb, func(c *lbrecon.Config) { c.Clock = fc })
		start := fc.Now()
		calls, during := 0, 0
		for {
			calls++
			require.Less(t, calls, 100, "no convergence")
			res, err := once(t, fc, r.ReconcileOnce)
			require.NoError(t, err, "an outage is waited out by requeues, not reported as a failure")
			if res.Converged {
				break
			}
			require.Positive(t, res.RequeueAfter)
			require.LessOrEqual(t, res.RequeueAfter, lbrecon.DefaultMaxPollInterval)
			if fc.Since(start) < 30*time.Second {
				during++
				require.ErrorIs(t, res.Transient, lbrecontest.ErrInjected, "the 503 is reported with the requeue")
			}
			fc.Step(res.RequeueAfter)
		}
		// Requeues from RetryInterval doubling to MaxPollInterval: 0.2,
		// 0.4, ..., 6.4, 10, 10 s cover 30 s in about ten calls.
		require.LessOrEqual(t, during, 10, "requeues grow during an outage")
		require.Equal(t, objectCount(lb), eng.Calls()[lbrecon.VerbCreate], "no duplicates")
		requireConverged(t, eng, r, lb)

		// The same outage during a teardown.
		eng.Unavailable(30 * time.Second)
		start, calls, during = fc.Now(), 0, 0
		for {
			calls++
			require.Less(t, calls, 100, "no teardown")
			res, err := once(t, fc, r.TeardownOnce)
			require.NoError(t, err, "an outage is waited out by requeues, not reported as a failure")
			if res.Converged {
				break
			}
			require.Positive(t, res.RequeueAfter)
			if fc.Since(start) < 30*time.Second {
				during++
				require.ErrorIs(t, res.Transient, lbrecontest.ErrInjected, "the 503 is reported with the requeue")
			}
			fc.Step(res.RequeueAfter)
		}
		require.LessOrEqual(t, during, 10, "requeues grow during an outage")
		require.Empty(t, eng.Objects(), "everything torn down")
	})
}

// Engine calls slower than the pending deadline: the deadline falls inside
// the pass, and the result still says when to call again (the next call
// reports the timeout).
func TestReconcileOnceDeadlineInsideThePassRequeues(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		eng := newEngine(lbrecontest.Config{Latency: 2 * time.Second})
		eng.Put(lbrecon.Object{Kind: lbrecon.KindBackend, Name: "p0.svc-1", Tags: []string{owner},
			Spec: lbrecon.BackendSpec{LoadBalancer: "lb-1"}, State: lbrecon.StatePending})
		// p1's backend is created in the pass that first sees p0 pending:
		// the create takes longer than p0's pending timeout.
		r := newLB(t, eng, desc(2, 1, 1), func(c *lbrecon.Config) { c.PendingTimeout = time.Second })
		res, err := r.ReconcileOnce(t.Context())
		require.NoError(t, err)
		require.False(t, res.Converged)
		require.Positive(t, res.RequeueAfter, "not converged, no error: a requeue is due")
		<-time.After(res.RequeueAfter)
		_, err = r.ReconcileOnce(t.Context())
		require.ErrorIs(t, err, lbrecon.ErrPendingTimeout)
	})
}

// Over random provider models and faults, every ReconcileOnce and
// TeardownOnce result is converged, or has a positive RequeueAfter, or an
// error; and a converged result has an empty plan. Sixty models (twenty
// under -short).
func TestReconcileOnceRequeueInvariant(t *testing.T) {
	for seed := range inShort[uint64](60, 20) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				rng := rand.New(rand.NewPCG(seed, 7))
				ms := func(lo, hi int) time.Duration { return time.Duration(lo+rng.IntN(hi-lo+1)) * time.Millisecond }
				cfg := lbrecontest.Config{Latency: ms(0, 3000), Pending: ms(0, 4000), ListLag: ms(0, 4000),
					DeleteDelay: ms(0, 3000), Integrity: rng.IntN(2) == 0, UniqueBinds: true, Repair: rng.IntN(2) == 0}
				eng := lbrecontest.New(cfg)
				always := func(lbrecon.Object) bool { return true }
				eng.FailCreate(always, rng.IntN(3), nil)
				eng.FailCreateAfter(always, rng.IntN(3))
				eng.TurnFailed(always, rng.IntN(3))
				eng.RateLimit(lbrecon.VerbList, rng.IntN(3), ms(0, 2000))
				if rng.IntN(3) == 0 {
					eng.Unavailable(ms(0, 20000))
				}
				lb := desc(1+rng.IntN(2), 1+rng.IntN(2), 1+rng.IntN(3))
				r := newLB(t, eng, lb, func(c *lbrecon.Config) {
					c.PendingTimeout = ms(500, 8000)
					c.ConfirmTimeout = ms(500, 8000)
					c.PollInterval = ms(50, 500)
					c.MaxPollInterval = c.PollInterval + ms(0, 5000)
				})
				check := func(what string, call func(context.Context) (lbrecon.Result, error)) {
					for range 60 {
						res, err := call(t.Context())
						switch {
						case err != nil:
							<-time.After(time.Second) // the host's error backoff
							continue
						case res.Converged:
							require.True(t, res.Plan.Empty(), "%s: converged with a plan: %+v", what, res.Plan)
							return
						}
						require.Positive(t, res.RequeueAfter, "%s: not converged, no error, no requeue", what)
						<-time.After(res.RequeueAfter)
					}
				}
				check("reconcile", r.ReconcileOnce)
				lb.Targets = append(lb.Targets, lbrecon.Target{Name: "extra", Address: netip.MustParseAddr("10.9.0.1")})
				require.NoError(t, r.SetLoadBalancer(lb))
				check("change", r.ReconcileOnce)
				check("teardown", r.TeardownOnce)
			})
		})
	}
}

// In one pass, a create that failed transiently and a create refused with
// a 429 are requeues, not errors: the transient one holds its name, the
// rate-limited one is requeued no sooner than the provider's hint.
func TestReconcileOnceFailedCreatesAreRequeues(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		eng := newEngine(lbrecontest.Config{})
		eng.FailCreate(func(o lbrecon.Object) bool { return o.Name == "p0.svc-1" }, 1, nil)
		eng.FailCreate(func(o lbrecon.Object) bool { return o.Name == "p1.svc-1" }, 1, &lbrecontest.RateLimitError{After: 7 * time.Second})
		r := newLB(t, eng, desc(2, 1, 1), nil)
		res, err := r.ReconcileOnce(t.Context())
		require.NoError(t, err)
		require.ErrorIs(t, res.Transient, lbrecontest.ErrInjected)
		var limited *lbrecontest.RateLimitError
		require.ErrorAs(t, res.Transient, &limited)
		require.GreaterOrEqual(t, res.RequeueAfter, 7*time.Second, "the hint is honoured")
		require.Equal(t, 2, eng.Calls()[lbrecon.VerbCreate], "one attempt each, no retry inside the call")
		p, err := r.Check(t.Context())
		require.NoError(t, err)
		require.Len(t, p.Create, 1, "p1 is created again, p0's name is held: its create may have happened")
		require.Equal(t, "p1.svc-1", p.Create[0].Name)
	})
}

// A provider that never answers (its calls end only with their context):
// one ReconcileOnce takes one CallTimeout, and reports a requeue.
func TestReconcileOnceBoundedByTheCallTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		eng := newEngine(lbrecontest.Config{Latency: time.Hour})
		r := newLB(t, eng, desc(1, 1, 1), func(c *lbrecon.Config) { c.CallTimeout = 5 * time.Second })
		start := time.Now()
		res, err := r.ReconcileOnce(t.Context())
		require.NoError(t, err)
		require.Equal(t, 5*time.Second, time.Since(start))
		require.ErrorIs(t, res.Transient, context.DeadlineExceeded)
		require.Positive(t, res.RequeueAfter)
	})
}

// Check, Observe and Status against a provider answering 503: each makes
// one List and returns at once with the error, instead of retrying on the
// clock for RetryBudget.
func TestCheckAndObserveListOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fc := clocktesting.NewFakeClock(time.Unix(1000, 0))
		eng := realistic(func(c *lbrecontest.Config) { c.Clock, c.Latency = fc, 0 })
		eng.Unavailable(30 * time.Second)
		r := newLB(t, eng, desc(1, 1, 1), func(c *lbrecon.Config) { c.Clock = fc })
		for name, call := range map[string]func(context.Context) error{
			"Check":   func(ctx context.Context) error { _, err := r.Check(ctx); return err },
			"Observe": func(ctx context.Context) error { _, err := r.Observe(ctx); return err },
			"Status":  func(ctx context.Context) error { _, err := r.Status(ctx); return err },
		} {
			before := eng.Calls()[lbrecon.VerbList]
			_, err := once(t, fc, func(ctx context.Context) (lbrecon.Result, error) { return lbrecon.Result{}, call(ctx) })
			require.ErrorIs(t, err, lbrecontest.ErrInjected, name)
			require.Equal(t, before+1, eng.Calls()[lbrecon.VerbList], "%s lists once", name)
		}
	})
}

// hangingWrites answers List and Get at once and never answers a write:
// its writes end only with their context.
type hangingWrites struct {
	*lbrecontest.Engine
	writes atomic.Int32
}

func (h *hangingWrites) hang(ctx context.Context) error {
	h.writes.Add(1)
	<-ctx.Done()
	return ctx.Err()
}

func (h *hangingWrites) Create(ctx context.Context, _ lbrecon.Object) (lbrecon.Object, error) {
	return lbrecon.Object{}, h.hang(ctx)
}

func (h *hangingWrites) Destroy(ctx context.Context, _ lbrecon.Object) error { return h.hang(ctx) }

// A provider that lists at once but never answers a write, with more
// writes than Parallelism: one ReconcileOnce (and one TeardownOnce) sends
// one round of writes, returns once they timed out, one CallTimeout after
// it began, and leaves the writes it did not send free for the next call.
func TestReconcileOnceSendsNoCallAfterTheCallTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		inner := newEngine(lbrecontest.Config{Latency: time.Nanosecond, Pending: time.Nanosecond})
		lb := desc(8, 1, 1)
		for i, p := range lb.Ports { // owned backends, for the teardown
			if i%2 == 0 {
				inner.Put(lbrecon.Object{Kind: lbrecon.KindBackend, Name: p.Name + ".svc-1", Tags: []string{owner},
					Spec: lbrecon.BackendSpec{LoadBalancer: "lb-1"}, State: lbrecon.StateOK})
			}
		}
		eng := &hangingWrites{Engine: inner}
		r := newLB(t, eng, lb, func(c *lbrecon.Config) { c.CallTimeout, c.Parallelism = 5*time.Second, 2 })
		before, err := r.Check(t.Context())
		require.NoError(t, err)
		require.Greater(t, len(before.Create), 2)
		start := time.Now()
		res, err := r.ReconcileOnce(t.Context())
		require.NoError(t, err)
		require.LessOrEqual(t, time.Since(start), 5*time.Second+time.Millisecond, "one round of writes, then no more")
		require.False(t, res.Converged)
		require.Positive(t, res.RequeueAfter)
		require.ErrorIs(t, res.Transient, context.DeadlineExceeded, "the writes that timed out are reported")
		require.EqualValues(t, 2, eng.writes.Load(), "one round of Parallelism writes")
		p, err := r.Check(t.Context())
		require.NoError(t, err)
		require.Len(t, p.Create, len(before.Create)-2, "the creations not sent hold no name; the two timed out are held")

		// The teardown, by a reconciler that holds no creation.
		r = newLB(t, eng, lb, func(c *lbrecon.Config) { c.CallTimeout, c.Parallelism = 5*time.Second, 2 })
		start = time.Now()
		res, err = r.TeardownOnce(t.Context())
		require.NoError(t, err)
		require.LessOrEqual(t, time.Since(start), 5*time.Second+time.Millisecond, "one round of destructions, then no more")
		require.EqualValues(t, 4, eng.writes.Load(), "one round of Parallelism destructions")
		require.False(t, res.Converged)
		require.Positive(t, res.RequeueAfter)
	})
}

// slowJournal answers the journal call named slow only when its context
// ends (or after an hour).
type slowJournal struct {
	lbrecon.Journal
	slow string
}

func (j slowJournal) wait(ctx context.Context, name string) error {
	if name != j.slow {
		return nil
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(time.Hour):
		return nil
	}
}

func (j slowJournal) Load(ctx context.Context) ([]lbrecon.Intent, error) {
	if err := j.wait(ctx, "Load"); err != nil {
		return nil, err
	}
	return j.Journal.Load(ctx)
}

func (j slowJournal) Record(ctx context.Context, in []lbrecon.Intent) error {
	if err := j.wait(ctx, "Record"); err != nil {
		return err
	}
	return j.Journal.Record(ctx, in)
}

func (j slowJournal) Forget(ctx context.Context, in []lbrecon.Intent) error {
	if err := j.wait(ctx, "Forget"); err != nil {
		return err
	}
	return j.Journal.Forget(ctx, in)
}

// A journal that does not answer (an annotation on an apiserver that
// hangs) holds ReconcileOnce no longer than the engine's calls may: every
// journal call ends by the time the pass has run for CallTimeout.
func TestReconcileOnceJournalCallsAreBounded(t *testing.T) {
	for _, slow := range []string{"Load", "Record", "Forget"} {
		t.Run(slow, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				eng := newEngine(lbrecontest.Config{})
				j := lbrecon.NewFileJournal(t.TempDir() + "/journal")
				if slow == "Forget" {
					// Something to forget: a creation the listing shows.
					require.NoError(t, j.Record(t.Context(), []lbrecon.Intent{{Kind: lbrecon.KindBackend, Name: "p0.svc-1",
						Spec: lbrecon.SpecFingerprint(lbrecon.BackendSpec{LoadBalancer: "lb-1"}), At: time.Now()}}))
					eng.Put(lbrecon.Object{Kind: lbrecon.KindBackend, Name: "p0.svc-1", Tags: []string{owner},
						Spec: lbrecon.BackendSpec{LoadBalancer: "lb-1"}, State: lbrecon.StateOK})
				}
				r := newLB(t, eng, desc(2, 1, 1), func(c *lbrecon.Config) {
					c.Journal, c.CallTimeout = slowJournal{Journal: j, slow: slow}, 5*time.Second
				})
				start := time.Now()
				res, err := r.ReconcileOnce(t.Context())
				require.LessOrEqual(t, time.Since(start), 5*time.Second, "journal calls are bounded by the pass, like engine calls")
				require.NoError(t, err)
				require.False(t, res.Converged)
				require.Positive(t, res.RequeueAfter)
			})
		})
	}
}
