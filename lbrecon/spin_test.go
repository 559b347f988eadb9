package lbrecon_test

import (
	"context"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconkit/reconkit/lbrecon"
	"github.com/reconkit/reconkit/lbrecon/lbrecontest"
)

// spinLimit is far above what any loop of the reconciler makes in the
// fake time of these tests, and far below what one that spins makes
// before the test's deadline.
const spinLimit = 20000

// hostPause is the host's own pause after an error (a stuck object, the
// failure budget spent) before it calls again; the reconciler returns
// such an error after a listing, so each costs the provider a call or two.
const hostPause = 10 * time.Second

// counting is an engine whose calls take no time, counted; past spinLimit
// calls it ends the run, so that a loop that spins (and, in a synctest
// bubble, never lets time advance) fails the test instead of hanging it.
type counting struct {
	*lbrecontest.Engine
	n      atomic.Int64
	cancel context.CancelFunc
}

func (c *counting) count() {
	if c.n.Add(1) == spinLimit {
		c.cancel()
	}
}

func (c *counting) List(ctx context.Context, q lbrecon.Query) ([]lbrecon.Object, error) {
	c.count()
	return c.Engine.List(ctx, q)
}

func (c *counting) Get(ctx context.Context, o lbrecon.Object) (lbrecon.Object, error) {
	c.count()
	return c.Engine.Get(ctx, o)
}

func (c *counting) Create(ctx context.Context, o lbrecon.Object) (lbrecon.Object, error) {
	c.count()
	return c.Engine.Create(ctx, o)
}

func (c *counting) Destroy(ctx context.Context, o lbrecon.Object) error {
	c.count()
	return c.Engine.Destroy(ctx, o)
}

func (c *counting) Tag(ctx context.Context, o lbrecon.Object, tags []string) error {
	c.count()
	return c.Engine.Tag(ctx, o, tags)
}

func (c *counting) Update(ctx context.Context, cur, want lbrecon.Object) (lbrecon.Object, error) {
	c.count()
	return c.Engine.Update(ctx, cur, want)
}

// adversary is a provider that answers every call at once and never lets
// the reconciler converge.
type adversary struct {
	name  string
	cfg   lbrecontest.Config
	setup func(t *testing.T, eng *lbrecontest.Engine, lb lbrecon.LoadBalancer)
	down  bool // the loop under test tears down
	// objects is how many objects the adversary's calls fail for at once,
	// each retried on its own backoff; zero means one.
	objects int
}

// adversaries answer at once: a List or Create refused with a retry-after
// hint of 0 or below, a Create that returns at once with an object pending
// forever, a Destroy that always fails,
// listings that never show what was created, a Destroy that returns at
// once while the object never goes.
func adversaries() []adversary {
	forever := 1000 * time.Hour
	return []adversary{
		{name: "list refused, hint 0", setup: func(_ *testing.T, eng *lbrecontest.Engine, _ lbrecon.LoadBalancer) {
			eng.RateLimit(lbrecon.VerbList, -1, 0)
		}},
		{name: "list refused, negative hint", setup: func(_ *testing.T, eng *lbrecontest.Engine, _ lbrecon.LoadBalancer) {
			eng.RateLimit(lbrecon.VerbList, -1, -time.Minute)
		}},
		{name: "create refused, negative hint", setup: func(_ *testing.T, eng *lbrecontest.Engine, _ lbrecon.LoadBalancer) {
			eng.RateLimit(lbrecon.VerbCreate, -1, -time.Second)
		}, objects: 2}, // the first wave: two backends
		{name: "created objects pending forever", cfg: lbrecontest.Config{Pending: forever}},
		{name: "listings empty forever", cfg: lbrecontest.Config{ListLag: forever}},
		{name: "destroyed objects never go", cfg: lbrecontest.Config{DeleteDelay: forever}, down: true,
			setup: func(t *testing.T, eng *lbrecontest.Engine, lb lbrecon.LoadBalancer) {
				r := newLB(t, eng, lb, nil)
				require.NoError(t, r.Reconcile(t.Context()))
			}},
		{name: "destroy refused", down: true,
			setup: func(t *testing.T, eng *lbrecontest.Engine, lb lbrecon.LoadBalancer) {
				r := newLB(t, eng, lb, nil)
				require.NoError(t, r.Reconcile(t.Context()))
				eng.FailDestroy(nil, -1)
			}, objects: 10}, // every object of the load balancer
	}
}

// spinFor is how long each spin test runs its loop, in fake time: an hour,
// or 10 minutes under -short (the backoffs reach their ceilings within the
// first minute, and a loop that spins reaches spinLimit at once).
func spinFor() time.Duration { return inShort(time.Hour, 10*time.Minute) }

// TestBlockingLoopsNeverSpin runs Reconcile and Teardown against providers
// that answer every call at once without ever letting them converge, for
// spinFor of fake time, and bounds the engine calls per minute.
func TestBlockingLoopsNeverSpin(t *testing.T) {
	runAdversaries(t, func(ctx context.Context, t *testing.T, r *lbrecon.LoadBalancerReconciler, down bool) {
		if down {
			_ = r.Teardown(ctx)
		} else {
			_ = r.Reconcile(ctx)
		}
		if ctx.Err() == nil {
			<-time.After(hostPause)
		}
	})
}

// TestOnceLoopsNeverSpin is the same for a host that calls ReconcileOnce or
// TeardownOnce again after each RequeueAfter.
func TestOnceLoopsNeverSpin(t *testing.T) {
	runAdversaries(t, func(ctx context.Context, t *testing.T, r *lbrecon.LoadBalancerReconciler, down bool) {
		once := r.ReconcileOnce
		if down {
			once = r.TeardownOnce
		}
		res, err := once(ctx)
		if err != nil {
			<-time.After(hostPause)
			return
		}
		require.False(t, res.Converged)
		require.Positive(t, res.RequeueAfter)
		<-time.After(res.RequeueAfter)
	})
}

// runAdversaries calls step, one round of a host's loop, for spinFor of
// fake time against each adversary, and bounds the engine calls per
// minute.
func runAdversaries(t *testing.T, step func(ctx context.Context, t *testing.T, r *lbrecon.LoadBalancerReconciler, down bool)) {
	for _, a := range adversaries() {
		t.Run(a.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(t.Context(), spinFor())
				defer cancel()
				eng := &counting{Engine: lbrecontest.New(a.cfg), cancel: cancel}
				lb := desc(2, 1, 2)
				if a.setup != nil {
					a.setup(t, eng.Engine, lb)
				}
				eng.n.Store(0)
				r := newLB(t, eng, lb, nil)
				start := time.Now()
				for ctx.Err() == nil {
					step(ctx, t, r, a.down)
				}
				requireBounded(t, eng.n.Load(), time.Since(start), max(a.objects, 1))
			})
		})
	}
}

// TestLeftoversNeverSpin is the same for Leftovers, blocking and once, on a
// provider whose deletions never complete.
func TestLeftoversNeverSpin(t *testing.T) {
	for _, blocking := range []bool{true, false} {
		synctest.Test(t, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), spinFor())
			defer cancel()
			eng := &counting{Engine: lbrecontest.New(lbrecontest.Config{DeleteDelay: 1000 * time.Hour}), cancel: cancel}
			require.NoError(t, newLB(t, eng.Engine, desc(2, 1, 2), nil).Reconcile(t.Context()))
			l, err := lbrecon.NewLeftovers(lbrecon.Config{Engine: eng, Tag: owner, Journal: lbrecon.NoJournal})
			require.NoError(t, err)
			start := time.Now()
			for ctx.Err() == nil {
				if blocking {
					_ = l.Teardown(ctx)
					<-time.After(hostPause)
					continue
				}
				res, err := l.TeardownOnce(ctx)
				if err != nil {
					<-time.After(hostPause)
					continue
				}
				require.Positive(t, res.RequeueAfter)
				<-time.After(res.RequeueAfter)
			}
			requireBounded(t, eng.n.Load(), time.Since(start), 1)
		})
	}
}

// maxPerMinute bounds the engine calls a minute of fake time for each
// object the adversary fails at once: polls that grow to MaxPollInterval,
// retries that double from RetryInterval, and the host's pauses make at
// most about 16 against these adversaries.
const maxPerMinute = 20

func requireBounded(t *testing.T, calls int64, took time.Duration, objects int) {
	t.Helper()
	require.Less(t, calls, int64(spinLimit), "the loop spun")
	require.GreaterOrEqual(t, took, spinFor()-time.Minute, "the loop ran for spinFor")
	rate := float64(calls) / took.Minutes()
	t.Logf("%d engine calls in %v (%.1f a minute)", calls, took, rate)
	require.LessOrEqual(t, rate, float64(maxPerMinute*objects), "engine calls per minute of fake time")
}
