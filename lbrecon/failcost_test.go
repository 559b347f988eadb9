package lbrecon_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconkit/reconkit/lbrecon"
	"github.com/reconkit/reconkit/lbrecon/lbrecontest"
)

// Tests of what transient create failures cost: a creation of unknown
// outcome holds its name only as long as the provider's declarations
// (list lag, idempotency tokens) require, so that converging costs few
// calls and little time more than without failures. All run on fake time.

// With the default configuration, a provider that declares its list lag
// (ListLagger) has a failed creation's name held for that lag, not for
// ConfirmTimeout, also behind a Guard or a Crasher.
func TestDeclaredListLagEndsTheHold(t *testing.T) {
	for name, wrap := range map[string]func(lbrecon.Engine) lbrecon.Engine{
		"engine":  func(e lbrecon.Engine) lbrecon.Engine { return e },
		"guard":   func(e lbrecon.Engine) lbrecon.Engine { return lbrecon.Guard(e, nil) },
		"crasher": func(e lbrecon.Engine) lbrecon.Engine { return lbrecontest.NewCrasher(e) },
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				eng := newEngine(lbrecontest.Config{ListLag: 3 * time.Second, DeclareListLag: true})
				eng.FailCreate(func(o lbrecon.Object) bool { return o.Kind == lbrecon.KindBackend }, 1, nil)
				lb := desc(1, 1, 2)
				r := newLB(t, wrap(eng), lb, nil)
				start := time.Now()
				require.NoError(t, r.Reconcile(t.Context()))
				require.Less(t, time.Since(start), 30*time.Second, "held for the declared lag, not ConfirmTimeout")
				require.Equal(t, objectCount(lb)+1, eng.Calls()[lbrecon.VerbCreate], "the failed backend created again, nothing else")
				requireConverged(t, eng, r, lb)
			})
		})
	}
}

// A provider lagging by a number of listings has no time bound to
// declare: a failed creation is then held for ConfirmTimeout.
func TestListingCountLagDeclaresNoBound(t *testing.T) {
	eng := lbrecontest.New(lbrecontest.Config{ListLag: time.Second, LagListings: 1, DeclareListLag: true})
	require.Zero(t, eng.ListLag())
	require.Equal(t, time.Second, lbrecontest.New(lbrecontest.Config{ListLag: time.Second, DeclareListLag: true}).ListLag())
	require.Zero(t, lbrecontest.New(lbrecontest.Config{ListLag: time.Second}).ListLag())
}

// verbLog records the outcome of every engine call attempt, in order.
type verbLog struct {
	mu  sync.Mutex
	log []string
}

func (v *verbLog) hook(c *lbrecon.Config) {
	c.Metrics = lbrecon.MetricsFunc(func(verb lbrecon.Verb, out lbrecon.Outcome, _ time.Duration) {
		v.mu.Lock()
		defer v.mu.Unlock()
		v.log = append(v.log, string(verb)+"/"+string(out))
	})
}

// A creation sent with an idempotency token that fails transiently is
// sent again with its token within the same pass of Reconcile, after
// RetryInterval, not held until a later listing.
func TestIdempotentCreateRetriedWithinThePass(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		eng := newEngine(lbrecontest.Config{ListLag: 3 * time.Second, Idempotency: true})
		eng.FailCreate(nil, 1, nil)
		lb := desc(1, 1, 1)
		var calls verbLog
		r := newLB(t, eng, lb, calls.hook)
		require.NoError(t, r.Reconcile(t.Context()))
		require.Equal(t, []string{"list/ok", "create/transient", "create/ok"}, calls.log[:3],
			"the backend's creation is sent again before the next listing")
		require.Equal(t, objectCount(lb)+1, eng.Calls()[lbrecon.VerbCreate])
		requireConverged(t, eng, r, lb)
	})
}

// noUpdater hides the engine's Updater and Repairer: a changed object is
// replaced.
type noUpdater struct{ e *lbrecontest.Engine }

func (n noUpdater) List(ctx context.Context, q lbrecon.Query) ([]lbrecon.Object, error) {
	return n.e.List(ctx, q)
}

func (n noUpdater) Get(ctx context.Context, o lbrecon.Object) (lbrecon.Object, error) {
	return n.e.Get(ctx, o)
}

func (n noUpdater) Create(ctx context.Context, o lbrecon.Object) (lbrecon.Object, error) {
	return n.e.Create(ctx, o)
}

func (n noUpdater) CreateIdempotent(ctx context.Context, o lbrecon.Object, token string) (lbrecon.Object, error) {
	return n.e.CreateIdempotent(ctx, o, token)
}

func (n noUpdater) Destroy(ctx context.Context, o lbrecon.Object) error { return n.e.Destroy(ctx, o) }

func (n noUpdater) Tag(ctx context.Context, o lbrecon.Object, tags []string) error {
	return n.e.Tag(ctx, o, tags)
}

func (n noUpdater) ListLag() time.Duration { return n.e.ListLag() }

func (n noUpdater) ListLagListings() int { return n.e.ListLagListings() }

// The cost goals of cmd/bench/lbrecon's failing models, held on fake
// time: with 1 create in 7 failing transiently and a 3 s list lag, the
// default configuration converges 4 ports x 2 addresses x 50 targets in
// at most 1.2 x the minimum number of calls and 2 x the time of the same
// run without failures, and changes a node port on an engine that
// replaces servers in at most 1.2 x its minimum, when the provider
// declares its list lag or takes idempotency tokens. Under -short, the
// same with 30 targets.
func TestTransientCreateFailuresCost(t *testing.T) {
	targets := inShort(50, 30)
	type run struct {
		converge, nodePort       int // calls
		convergeWall, changeWall time.Duration
	}
	measure := func(t *testing.T, cfg lbrecontest.Config, failEvery int) run {
		var out run
		synctest.Test(t, func(t *testing.T) {
			eng := lbrecontest.New(cfg)
			if failEvery > 0 {
				n := 0 // counted under the engine's lock
				eng.FailCreate(func(lbrecon.Object) bool { n++; return n%failEvery == 0 }, -1, nil)
			}
			lb := desc(4, 2, targets)
			r := newLB(t, noUpdater{eng}, lb, nil)
			start := time.Now()
			require.NoError(t, r.Reconcile(t.Context()))
			out.convergeWall, out.converge = time.Since(start), eng.TotalCalls()
			eng.ResetCalls()
			eng.ResetLow()
			lb.Ports[0].NodePort = 31000
			require.NoError(t, r.SetLoadBalancer(lb))
			start = time.Now()
			require.NoError(t, r.Reconcile(t.Context()))
			out.changeWall, out.nodePort = time.Since(start), eng.TotalCalls()
			for _, n := range eng.Low(lbrecon.KindServer) {
				require.GreaterOrEqual(t, n, targets, "make-before-break")
			}
			requireConverged(t, eng, r, lb)
		})
		return out
	}
	// One List, one call per object, one observation per wave (backends;
	// frontends and servers; binds), and for the change: the new servers,
	// then the old ones once the new serve.
	convergeMin, nodePortMin := 1+objectCount(desc(4, 2, targets))+3, 1+2*targets+2
	for name, mod := range map[string]func(*lbrecontest.Config){
		"declared lag": func(c *lbrecontest.Config) { c.DeclareListLag = true },
		"tokens":       func(c *lbrecontest.Config) { c.Idempotency = true },
	} {
		t.Run(name, func(t *testing.T) {
			cfg := lbrecontest.Config{Latency: 20 * time.Millisecond, Pending: time.Second, ListLag: 3 * time.Second, DeleteDelay: 2 * time.Second}
			mod(&cfg)
			base, failing := measure(t, cfg, 0), measure(t, cfg, 7)
			t.Logf("converge: %d calls (min %d), %v (%v without failures); node port: %d calls (min %d)",
				failing.converge, convergeMin, failing.convergeWall, base.convergeWall, failing.nodePort, nodePortMin)
			require.LessOrEqual(t, float64(failing.converge), 1.2*float64(convergeMin), "converge calls")
			require.LessOrEqual(t, failing.convergeWall, 2*base.convergeWall, "converge time")
			require.LessOrEqual(t, float64(failing.nodePort), 1.2*float64(nodePortMin), "node-port change calls")
		})
	}
}
