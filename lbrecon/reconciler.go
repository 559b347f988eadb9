package lbrecon

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/utils/clock"
)

// The Reconciler: its state, Check and Observe, and the blocking calls
// (Reconcile, Teardown), which repeat passes and wait (wait.go) between them.

// Reconciler drives an [Engine] towards the state its [Step]s describe.
// It remembers, between calls, the writes no listing has confirmed yet, the
// failure counts, and how long objects have been pending: keep one
// Reconciler per set of objects for as long as the host manages them,
// across leadership terms too: a call whose context carries a new term's
// fencing token begins that term (see [Config.Admit]) before it reads.
// Check and Observe may run at any time, beside the other calls: their
// listings are merged into the memory in the order they started, not the
// order they return, and a listing that started before one already merged
// changes nothing. Reconcile, ReconcileOnce, Teardown and TeardownOnce
// calls on one Reconciler are serialised (a second call waits for the
// first).
type Reconciler struct {
	cfg        Config
	tagKey     string
	clock      clock.Clock
	rand       func() float64 // the retries' jitter, split from cfg.Rand
	metrics    Metrics
	deps       [][]int // per step: indexes of the steps it depends on
	dependents [][]int // per step: indexes of the steps depending on it
	stepOf     map[string]int

	// down plans a step for a teardown; nil means destroy every owned
	// object of the step's kind.
	down func(st Step) func(context.Context, *Observation) (Changes, error)

	mu      sync.Mutex // serialises Reconcile, ReconcileOnce and the teardowns
	memMu   sync.Mutex // guards mem and merged
	mem     memory
	merged  uint64        // the number of the newest listing merged into mem: an older one changes nothing (see fold)
	requeue time.Duration // next RequeueAfter of ReconcileOnce and TeardownOnce
	retry   time.Duration // last wait after a pass that met transient failures

	// entries chooses the journal entries the reconciler loads, and
	// scopeOf the scope its destructions are journaled under; nil: its
	// own scope (destroyjournal.go).
	entries func(Intent) bool
	scopeOf func(Object) string

	journalMu     sync.Mutex
	journalLoaded bool          // the journal's intents are in mem (guarded by journalMu)
	tokenSeq      uint64        // makes idempotency tokens unique (guarded by mu)
	idempotency   atomic.Int32  // 1: the engine takes idempotency tokens; -1: it does not; 0: not known yet
	listings      atomic.Uint64 // List calls started, for ListLagListings
	laggingUntil  *horizon      // a listing showed a child without its parent: wait until then (guarded by mu)

	termMu      sync.Mutex // guards term, inTerm and termHorizon; taken before journalMu and memMu
	term        uint64     // the fencing token of the term the memory belongs to
	inTerm      bool       // term is set
	termHorizon horizon    // the first listing past the current term's beginning; zero in the first term

	// Orphans (horizon.go): the children a listing showed without their
	// parent, and the keys of the last listing merged.
	orphanWatch atomic.Pointer[orphanWatch]
	lastListed  atomic.Pointer[listedKeys]
}

// Check lists the provider's objects once and returns the plan for them
// without changing anything at the provider. An empty plan means a listing
// confirms the desired state. Like a pass, it loads the [Config.Journal]
// first, so a new process's plan holds its predecessor's creations. It
// makes one List attempt, within CallTimeout, and does not retry it: a
// failed List is its error. When its listing started before one already
// merged (a pass's, another Check's), Check returns the plan for its own,
// older listing, read against the memory as it is, and changes nothing
// the reconciler remembers.
func (r *Reconciler) Check(ctx context.Context) (Plan, error) {
	if err := r.beginTerm(ctx); err != nil {
		return Plan{}, err
	}
	if err := r.loadJournal(ctx); err != nil {
		return Plan{}, err
	}
	objs, at, err := r.list(onePass(ctx, r.clock.Now()))
	if err != nil {
		return Plan{}, err
	}
	p, err := r.planFor(ctx, objs, at, false)
	if err != nil {
		return Plan{}, err
	}
	return p.public(), nil
}

// Observe lists the provider's objects once and returns those the
// reconciler owns grouped by kind, without changing anything. Like Check,
// it makes one List attempt and does not retry it; like Check's, a
// listing that started before one already merged returns what it shows
// and changes nothing the reconciler remembers.
func (r *Reconciler) Observe(ctx context.Context) (*Observation, error) {
	if err := r.beginTerm(ctx); err != nil {
		return nil, err
	}
	objs, at, err := r.list(onePass(ctx, r.clock.Now()))
	if err != nil {
		return nil, err
	}
	r.memMu.Lock()
	defer r.memMu.Unlock()
	v, done, err := r.fold(objs, at)
	if err != nil {
		return nil, err
	}
	defer done()
	return v.observation(), nil
}

// ResetFailures drops every failure count, so that objects that used up
// [Config.FailureBudget] are repaired or recreated again. A host calls it
// when an operator has fixed the cause, or when the desired state changes.
func (r *Reconciler) ResetFailures() {
	r.memMu.Lock()
	defer r.memMu.Unlock()
	clear(r.mem.failures)
}

// Reconcile changes the provider's objects until a listing confirms the
// desired state, waiting on the clock for pending objects and for listings
// to reflect its writes. Each pass lists once, repairs or recreates failed
// objects (within [Config.FailureBudget]), adopts untagged objects it was
// about to create, destroys what nothing depends on any more, creates and
// updates, and destroys replaced objects once their replacements are in
// service. It returns nil once converged, an error wrapping ctx.Err() when
// ctx ends, and a wrapped error when no further pass can make progress;
// objects changed before an error stay changed and the next call carries on
// from them.
func (r *Reconciler) Reconcile(ctx context.Context) error {
	return r.converge(ctx, false)
}

// Teardown destroys every object the reconciler owns and waits until a
// listing shows none left: children before parents, each parent once a
// listing shows its children gone (references), asynchronous deletion
// waited for on the clock and never re-issued, failed and pending objects
// destroyed like the rest (neither repaired nor recreated). Untagged
// objects are never destroyed. "Owned" is what the steps' kinds hold with
// the ownership tag, wherever they are; a [LoadBalancerReconciler] tears
// down only its own load balancer's objects. Returns, errors and memory
// are those of Reconcile; a later Reconcile creates everything again.
func (r *Reconciler) Teardown(ctx context.Context) error {
	return r.converge(ctx, true)
}

func (r *Reconciler) converge(ctx context.Context, down bool) (err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	start := r.clock.Now()
	defer func() { r.metrics.Observe(verbOf(down), classify(err), r.clock.Since(start)) }()
	log := logr.FromContextOrDiscard(ctx).WithValues("scope", r.cfg.Scope)

	if err := r.beginTerm(ctx); err != nil {
		return err
	}
	if err := r.loadJournal(ctx); err != nil {
		return err
	}
	var listed []Object
	var listedAt listing
	fresh := false                // listed is the last poll's listing
	var forgetRetry time.Duration // the last wait for a journal that failed to forget
	for pass := 1; ; pass++ {
		if !fresh {
			if listed, listedAt, err = r.list(ctx); err != nil {
				return err
			}
		}
		p, err := r.pass(ctx, listed, listedAt, down)
		if r.lagging(err, listedAt) {
			// A replica showed a child before its parent: list again.
			fresh = false
			t := r.clock.NewTimer(r.cfg.PollInterval)
			select {
			case <-ctx.Done():
				t.Stop()
				return fmt.Errorf("lbrecon: wait for a listing that shows every parent: %w", ctx.Err())
			case <-t.C():
			}
			continue
		}
		if err != nil {
			return err
		}
		if p.converged() && down {
			wait, failed := r.unsettled()
			if failed != nil {
				// The journal failed to forget confirmed destructions:
				// retry after a growing wait.
				forgetRetry = min(max(2*forgetRetry, r.cfg.RetryInterval), r.cfg.MaxPollInterval)
				wait = max(wait, forgetRetry, retryAfter(failed))
			}
			if wait > 0 {
				// No owned object left; its destructions wait in the
				// journal for their confirmation: list again then.
				fresh = false
				t := r.clock.NewTimer(wait)
				select {
				case <-ctx.Done():
					t.Stop()
					return fmt.Errorf("lbrecon: wait for the list lag after the teardown: %w", ctx.Err())
				case <-t.C():
				}
				continue
			}
		}
		if p.converged() {
			log.V(1).Info("reconciled", "passes", pass, "teardown", down)
			return nil
		}
		if p.fence != nil {
			return p.err() // no later pass carries a fresher token
		}
		if !p.changed && len(p.waiting) == 0 {
			if err := p.err(); err != nil {
				return err
			}
		}
		if pass >= r.cfg.MaxPasses {
			return errors.Join(fmt.Errorf("%w after %d passes", ErrNotConverged, pass), p.err())
		}
		if listed, listedAt, fresh, err = r.wait(ctx, p, down); err != nil {
			return err
		}
	}
}

func verbOf(down bool) Verb {
	if down {
		return VerbTeardown
	}
	return VerbReconcile
}

// teardownPlan returns the plan of st for a teardown.
func (r *Reconciler) teardownPlan(st Step) func(context.Context, *Observation) (Changes, error) {
	if r.down != nil {
		return r.down(st)
	}
	return func(_ context.Context, obs *Observation) (Changes, error) {
		return Changes{Destroy: slices.Clone(obs.Objects(st.Kind))}, nil
	}
}
