package fleetsim

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing/synctest"
	"time"

	"k8s.io/utils/clock"

	"github.com/reconkit/reconkit/kubefake"
	"github.com/reconkit/reconkit/lbrecon"
	"github.com/reconkit/reconkit/lbrecon/lbrecontest"
)

// world is one run: the apiserver, the provider, the fleet, the timeline and
// the violations seen so far.
type world struct {
	cfg      Config
	id       string // tells this run's goroutines from other runs' in one process
	tl       *timeline
	server   *kubefake.Server
	observer *kubefake.Client // the checks' own client, never cut
	engine   *lbrecontest.Engine
	fenced   lbrecon.Engine // the engine behind the world's fence
	fence    *lbrecon.Fence
	agents   []*slot
	terms    termWatch
	quieting atomic.Bool // the quiet period began: count-bound provider faults are spent
	serving  serving
	// namespaces are the flags of the namespaces NamespaceDelete
	// deleted: set while creations in them are refused.
	namespaces map[string]*atomic.Bool

	mu         sync.Mutex
	violations []Violation
	failed     chan struct{} // closed at the first violation
	abort      context.CancelFunc
	requests   int
}

// violate records a violation; the first one ends the run.
func (w *world) violate(inv Invariant, agent, format string, args ...any) {
	v := Violation{At: time.Since(w.tl.start), Invariant: inv, Agent: agent, Detail: fmt.Sprintf(format, args...)}
	w.tl.add("check", "VIOLATED %s: %s%s", inv, prefix(agent), v.Detail)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.violations = append(w.violations, v)
	if len(w.violations) == 1 {
		close(w.failed)
		w.abort()
	}
}

func prefix(agent string) string {
	if agent == "" {
		return ""
	}
	return agent + ": "
}

// Simulate runs the fleet cfg describes under its nemesis and returns what
// it saw. It must be called inside a synctest bubble (Test makes one), where
// hours of simulated time pass in moments, and returns once every goroutine
// it started has ended. ctx ends the run early.
func Simulate(ctx context.Context, cfg Config) Result {
	cfg = cfg.withDefaults()
	if cfg.Provider.Seed == 0 {
		// The provider's draws (read replicas' lags) vary with the run's
		// seed, as everything else the run draws does.
		cfg.Provider.Seed = stream(cfg.Seed, "provider").Uint64()
	}
	if d := time.Until(cfg.Start); d > 0 {
		time.Sleep(d) // the bubble's clock jumps to Start
	}
	w := &world{cfg: cfg, tl: &timeline{start: time.Now()}, failed: make(chan struct{})}
	w.id = fmt.Sprintf("%p", w)
	w.server = cfg.Kube.NewServer(cfg.Objects...)
	w.observer = w.server.NewClient()
	w.engine = lbrecontest.New(cfg.Provider)
	w.fence = lbrecon.NewFence("the fleet's provider", 0, "start the simulation again")
	w.fenced = lbrecon.Guard(&passed{w: w, e: w.engine}, w.check)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w.abort = cancel

	var observers sync.WaitGroup
	observers.Go(func() { w.watchLeases(ctx) })
	observers.Go(func() { w.lifecycle(ctx) })

	delays := stream(cfg.Seed, "watch-delays")
	for i := range cfg.Agents {
		s := newSlot(w, i)
		s.watchDelay = time.Duration(delays.Int64N(int64(maxWatchDelay)))
		w.agents = append(w.agents, s)
	}
	w.startStaggered(ctx)
	n := newNemesis(w)
	events := n.run(ctx)
	if ctx.Err() == nil && !w.hasFailed() {
		w.quiet(ctx, n)
	}
	for _, s := range w.agents {
		if s.running() {
			w.stop(s, false)
		}
	}
	cancel()
	observers.Wait()

	r := Result{Seed: cfg.Seed, Timeline: w.tl.entries(), Simulated: time.Since(w.tl.start), Events: events}
	w.mu.Lock()
	r.Violations = append(r.Violations, w.violations...)
	r.Requests = w.requests
	w.mu.Unlock()
	for _, s := range w.agents {
		r.AgentTime += s.ran
	}
	return r
}

// stagger is the span of simulated time at the start of a run within which
// the agents start, each at an instant the seed draws (see the package
// documentation on replaying a seed).
const stagger = time.Second

// maxWatchDelay bounds the delay drawn for each agent's watches: each
// agent sees a change at its own instant, in an order the seed draws,
// instead of every agent at the write's instant in the scheduler's order.
const maxWatchDelay = 10 * time.Millisecond

// startStaggered starts every agent, each at its own instant within
// stagger of the run's start, in the order of those instants. The instants
// are drawn from the seed (a stream of their own, which shifts none of the
// nemesis's draws) at nanosecond resolution: agents whose loops tick at the
// same periods then wake at distinct instants of simulated time, so that
// what one agent does at an instant is done, and settled, before the next
// wakes, instead of in whichever order the scheduler runs them.
func (w *world) startStaggered(ctx context.Context) {
	rng := stream(w.cfg.Seed, "starts")
	at := make([]time.Duration, len(w.agents))
	for i := range at {
		at[i] = time.Duration(rng.Int64N(int64(stagger)))
	}
	order := make([]int, len(w.agents))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(at[a], at[b]) })
	begin := time.Now()
	for _, i := range order {
		if !sleepCtx(ctx, time.Until(begin.Add(at[i]))) {
			return
		}
		w.start(ctx, w.agents[i])
	}
}

func (w *world) hasFailed() bool {
	select {
	case <-w.failed:
		return true
	default:
		return false
	}
}

// quiet undoes every fault, restarts every crashed agent, and waits for the
// fleet to converge within Config.Quiet.
func (w *world) quiet(ctx context.Context, n *nemesis) {
	w.tl.add("nemesis", "quiet period: every fault undone, every agent running")
	n.undoAll(ctx)
	for _, s := range w.agents {
		if !s.running() {
			w.start(ctx, s)
		}
	}
	if w.cfg.Converged == nil && w.cfg.Tag == "" {
		select {
		case <-time.After(w.cfg.Quiet):
		case <-w.failed:
		case <-ctx.Done():
		}
		return
	}
	fleet := func() []Deps {
		var fleet []Deps
		for _, s := range w.agents {
			d := s.deps(false)
			d.Checkpoint = s.lastRecord()
			fleet = append(fleet, d)
		}
		return fleet
	}
	converged := func([]lbrecon.Object) bool { return true }
	refused := map[string]string{}
	var last string
	cond := func(objs []lbrecon.Object) bool {
		if bad := w.leaks(objs); bad != "" {
			last = bad
			return false
		}
		last = "the provider's objects are not what the fleet describes"
		f := fleet()
		for _, d := range f {
			why := ""
			if e := d.Checkpoint.Error; e != nil {
				why = e.Reason + ": " + e.Message
			}
			if refused[d.Name] != why {
				refused[d.Name] = why
				w.tl.add("check", "%s's assigned configuration: refused=%v %s", d.Name, why != "", why)
			}
		}
		if w.cfg.Converged != nil {
			converged = w.cfg.Converged(f)
		}
		return converged(objs)
	}
	qctx, cancel := context.WithTimeout(ctx, w.cfg.Quiet)
	defer cancel()
	// WaitFor judges at every change of the provider; a change of the
	// fleet (a configuration refused at a restart) is judged within 10
	// seconds.
	var err error
	for {
		sub, cancel := context.WithTimeout(qctx, 10*time.Second)
		err = w.engine.WaitFor(sub, cond)
		cancel()
		if err == nil || qctx.Err() != nil {
			break
		}
	}
	if err != nil && !w.hasFailed() && ctx.Err() == nil {
		w.violate(Converges, "", "not converged %s after the nemesis stopped: %s; %v", w.cfg.Quiet, last, err)
		return
	}
	if !w.hasFailed() {
		w.tl.add("check", "converged")
	}
}

// leaks describes an untagged object or two tagged objects of one kind and
// name, or returns "".
func (w *world) leaks(objs []lbrecon.Object) string {
	if w.cfg.Tag == "" {
		return ""
	}
	seen := map[[2]string]string{}
	for _, o := range objs {
		if !o.HasTag(w.cfg.Tag) {
			return fmt.Sprintf("%s is not tagged %q (leaked)", o, w.cfg.Tag)
		}
		k := [2]string{o.Kind, o.Name}
		if id, dup := seen[k]; dup {
			return fmt.Sprintf("%s %q exists twice (%s and %s)", o.Kind, o.Name, id, o.ID)
		}
		seen[k] = o.ID
	}
	return ""
}

// settle waits until every goroutine of the bubble but the caller is
// blocked, so that what the agents were about to do is done.
func settle() { synctest.Wait() }

var _ clock.WithTicker = clock.RealClock{}
