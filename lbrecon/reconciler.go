package lbrecon

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/utils/clock"
)

// Errors returned by [Reconciler] methods; callers branch on them with
// errors.Is.
var (
	// ErrInvalidConfig is wrapped by New when the configuration is unusable.
	ErrInvalidConfig = errors.New("lbrecon: invalid config")
	// ErrResourceFailed is wrapped when an object failed again after it was
	// repaired or recreated [Config.FailureBudget] times. The count is kept
	// across calls; see [Reconciler.ResetFailures].
	ErrResourceFailed = errors.New("lbrecon: resource keeps failing")
	// ErrPendingTimeout is wrapped when an object stays pending longer than
	// [Config.PendingTimeout].
	ErrPendingTimeout = errors.New("lbrecon: resources still pending")
	// ErrNotDestroyable is wrapped when some objects could not be destroyed.
	ErrNotDestroyable = errors.New("lbrecon: resources could not be destroyed")
	// ErrNotConverged is wrapped when Reconcile made [Config.MaxPasses]
	// passes without reaching the desired state.
	ErrNotConverged = errors.New("lbrecon: plan did not converge")
	// ErrInconsistent is wrapped when the engine's answer contradicts
	// itself: two objects with one kind and ID, two owned objects with one
	// name and spec, an object whose parent is not listed. Nothing is
	// changed because of such an answer.
	ErrInconsistent = errors.New("lbrecon: inconsistent engine answer")
)

// Defaults used when the corresponding Config field is zero.
const (
	DefaultParallelism     = 16
	DefaultPollInterval    = 500 * time.Millisecond
	DefaultMaxPollInterval = 10 * time.Second
	DefaultPendingTimeout  = 10 * time.Minute
	DefaultConfirmTimeout  = 2 * time.Minute
	DefaultGetPollMax      = 1
	DefaultRetryBudget     = time.Minute
	DefaultCallTimeout     = 30 * time.Second
	DefaultRetryInterval   = 200 * time.Millisecond
	DefaultFailureBudget   = 3
	DefaultMaxPasses       = 32
)

// Config configures a [Reconciler]. Zero durations and counts take the
// defaults above.
type Config struct {
	// Engine is the provider's API. Required. It may also implement
	// [Repairer] and [Updater].
	Engine Engine
	// Steps run in this order. Required; kinds must be unique.
	Steps []Step
	// Tag is the ownership tag, "key=value", applied to every object the
	// reconciler creates. Only objects carrying it are changed. Required.
	Tag string
	// Scope is passed to Engine.List (see [Query]).
	Scope string

	// Parallelism bounds the engine calls in flight inside one phase.
	Parallelism int
	// PollInterval is the first wait before looking again at pending or
	// unconfirmed objects; waits grow by 30% up to MaxPollInterval.
	PollInterval    time.Duration
	MaxPollInterval time.Duration
	// PendingTimeout bounds how long one object may stay pending, measured
	// from when the reconciler first saw it pending, across calls.
	PendingTimeout time.Duration
	// ConfirmTimeout bounds how long a write waits for a listing to reflect
	// it: a created or updated object not listed by then is taken as lost
	// (and created again), a destroyed object still listed is destroyed
	// again, and a creation whose outcome is unknown (a transient error)
	// blocks its name until then. It must exceed the list lag (ListLag,
	// configured or declared by the engine): New refuses a smaller one
	// with ErrInvalidConfig, and raises the default to twice the lag
	// when the lag is longer.
	ConfirmTimeout time.Duration
	// ListLag bounds how long the provider's listings lag behind its
	// writes: every listing that starts ListLag after a call returned
	// reflects it. With it, a creation whose outcome is unknown (a
	// transient error, a lost answer) holds its name only until such a
	// listing, instead of ConfirmTimeout. Zero takes the lag the engine
	// declares ([ListLagger]); when it declares none, the lag is unknown.
	ListLag time.Duration
	// ListLagListings bounds the provider's lag in listings instead of
	// time: of the listings that start after a call returned, the
	// (ListLagListings+1)-th and later reflect it, whoever made the ones
	// before. With it, a creation of unknown outcome holds its name only
	// until this reconciler's (ListLagListings+1)-th listing started after
	// the call, instead of ConfirmTimeout. Zero takes the count the engine
	// declares ([ListingLagger]); when it declares none, that lag is
	// unknown. With both ListLag and ListLagListings, whichever listing
	// comes first ends the hold.
	ListLagListings int
	// Journal records every creation durably before it is sent (see
	// [Journal], [FileJournal]), so that a reconciler started after a
	// crash holds the names its predecessor may have created until a
	// listing shows them or ConfirmTimeout passes, instead of creating
	// them again while the listing lags. Required: a host that runs
	// without one says so with [NoJournal] (intents in memory only); New
	// refuses nil with ErrInvalidConfig.
	Journal Journal
	// GetPollMax is the largest number of pending objects polled with one
	// Get each; more are polled with one List call instead.
	GetPollMax int
	// RetryBudget bounds the time Reconcile and Teardown spend retrying one
	// engine call that fails transiently or is rate limited. Permanent
	// errors are not retried, nor is a Create that failed transiently (it
	// may have created the object: the next listing tells). ReconcileOnce
	// and TeardownOnce never retry inside the call: the host's next call
	// is the retry.
	RetryBudget time.Duration
	// CallTimeout bounds each engine call attempt and each Journal call,
	// on Clock: the call's context ends then, and the attempt counts as a
	// timeout (a Create's outcome is then unknown). It also bounds each
	// pass of ReconcileOnce and TeardownOnce as a whole: every call of a
	// pass ends by the time the pass has run for CallTimeout, and none
	// starts with less than a tenth of it left, so a pass returns within
	// one CallTimeout.
	CallTimeout time.Duration
	// CallAttempts, when positive, also bounds the attempts of one call.
	CallAttempts int
	// RetryInterval is the first wait between attempts of one call (a
	// positive retry-after hint from the engine replaces it).
	RetryInterval time.Duration
	// FailureBudget is how many times the reconciler repairs or recreates
	// an object name that keeps failing before it leaves it failed and
	// reports ErrResourceFailed. The count survives Reconcile calls; it is
	// reset when an object of that name is seen ok, and by ResetFailures.
	FailureBudget int
	// MaxPasses bounds the passes of one blocking Reconcile call.
	MaxPasses int

	// Clock is used for every wait; nil means the real clock.
	Clock clock.Clock
	// Metrics receives call counts and durations; nil means none.
	Metrics Metrics
}

// Reconciler drives an [Engine] towards the state its [Step]s describe.
// It remembers, between calls, the writes no listing has confirmed yet, the
// failure counts, and how long objects have been pending: keep one
// Reconciler per set of objects for as long as the host manages them.
// Check may run at any time; Reconcile, ReconcileOnce, Teardown and
// TeardownOnce calls on one Reconciler are serialised (a second call waits
// for the first).
type Reconciler struct {
	cfg        Config
	tagKey     string
	clock      clock.Clock
	metrics    Metrics
	deps       [][]int // per step: indexes of the steps it depends on
	dependents [][]int // per step: indexes of the steps depending on it
	stepOf     map[string]int

	// down plans a step for a teardown; nil means destroy every owned
	// object of the step's kind.
	down func(st Step) func(context.Context, *Observation) (Changes, error)

	mu      sync.Mutex // serialises Reconcile, ReconcileOnce and the teardowns
	memMu   sync.Mutex // guards mem
	mem     memory
	requeue time.Duration // next RequeueAfter of ReconcileOnce and TeardownOnce
	retry   time.Duration // last wait after a pass that met transient failures

	journalMu     sync.Mutex
	journalLoaded bool          // the journal's intents are in mem (guarded by journalMu)
	tokenSeq      uint64        // makes idempotency tokens unique (guarded by mu)
	idempotency   atomic.Int32  // 1: the engine takes idempotency tokens; -1: it does not; 0: not known yet
	listings      atomic.Uint64 // List calls started, for ListLagListings
	laggingUntil  *horizon      // a listing showed a child without its parent: wait until then (guarded by mu)
}

// New validates cfg, fills its defaults and returns a Reconciler.
func New(cfg Config) (*Reconciler, error) {
	bad := func(format string, a ...any) (*Reconciler, error) {
		return nil, fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, a...)...)
	}
	if cfg.Engine == nil {
		return bad("Engine is nil")
	}
	if cfg.Journal == nil {
		return bad("Journal is nil: set a Journal (such as a FileJournal) so that a process started after a crash " +
			"does not create again what its predecessor created, or NoJournal to choose to run without one")
	}
	if len(cfg.Steps) == 0 {
		return bad("no Steps")
	}
	key, value, ok := strings.Cut(cfg.Tag, "=")
	if !ok || key == "" || value == "" || strings.ContainsAny(cfg.Tag, " \t\r\n") {
		return bad("Tag %q must be key=value with a non-empty key and value and no spaces", cfg.Tag)
	}
	kinds := make(map[string]int, len(cfg.Steps))
	for i, st := range cfg.Steps {
		if st.Kind == "" || st.Plan == nil {
			return bad("step %d needs a Kind and a Plan", i)
		}
		if _, dup := kinds[st.Kind]; dup {
			return bad("two steps manage kind %q", st.Kind)
		}
		kinds[st.Kind] = i
	}
	deps := make([][]int, len(cfg.Steps))
	dependents := make([][]int, len(cfg.Steps))
	for i, st := range cfg.Steps {
		for _, k := range st.DependsOn {
			j, ok := kinds[k]
			if !ok || j >= i {
				return bad("step %q depends on %q, which is not an earlier step", st.Kind, k)
			}
			deps[i] = append(deps[i], j)
			dependents[j] = append(dependents[j], i)
		}
	}
	confirmSet := cfg.ConfirmTimeout != 0
	for _, f := range []struct {
		name string
		v    *time.Duration
		def  time.Duration
	}{
		{"PollInterval", &cfg.PollInterval, DefaultPollInterval},
		{"MaxPollInterval", &cfg.MaxPollInterval, DefaultMaxPollInterval},
		{"PendingTimeout", &cfg.PendingTimeout, DefaultPendingTimeout},
		{"ConfirmTimeout", &cfg.ConfirmTimeout, DefaultConfirmTimeout},
		{"RetryBudget", &cfg.RetryBudget, DefaultRetryBudget},
		{"RetryInterval", &cfg.RetryInterval, DefaultRetryInterval},
		{"CallTimeout", &cfg.CallTimeout, DefaultCallTimeout},
	} {
		if *f.v < 0 {
			return bad("%s is negative", f.name)
		}
		if *f.v == 0 {
			*f.v = f.def
		}
	}
	if cfg.ListLag < 0 {
		return bad("ListLag is negative")
	}
	if ll, ok := cfg.Engine.(ListLagger); ok && cfg.ListLag == 0 {
		cfg.ListLag = max(ll.ListLag(), 0) // declared by the provider
	}
	if cfg.ListLagListings < 0 {
		return bad("ListLagListings is negative")
	}
	if ll, ok := cfg.Engine.(ListingLagger); ok && cfg.ListLagListings == 0 {
		cfg.ListLagListings = max(ll.ListLagListings(), 0) // declared by the provider
	}
	if cfg.ListLag >= cfg.ConfirmTimeout {
		// An acknowledged creation not listed within ConfirmTimeout is
		// given up and made again: it must outlast the lag.
		if confirmSet {
			return bad("ConfirmTimeout %v must exceed the list lag %v (configured or declared by the engine): "+
				"a creation not listed by then is made again; raise it or leave it zero", cfg.ConfirmTimeout, cfg.ListLag)
		}
		cfg.ConfirmTimeout = 2 * cfg.ListLag
	}
	if cfg.MaxPollInterval < cfg.PollInterval {
		return bad("MaxPollInterval %v is below PollInterval %v", cfg.MaxPollInterval, cfg.PollInterval)
	}
	if cfg.CallAttempts < 0 {
		return bad("CallAttempts is negative")
	}
	for _, f := range []struct {
		name string
		v    *int
		def  int
	}{
		{"Parallelism", &cfg.Parallelism, DefaultParallelism},
		{"GetPollMax", &cfg.GetPollMax, DefaultGetPollMax},
		{"FailureBudget", &cfg.FailureBudget, DefaultFailureBudget},
		{"MaxPasses", &cfg.MaxPasses, DefaultMaxPasses},
	} {
		if *f.v < 0 {
			return bad("%s is negative", f.name)
		}
		if *f.v == 0 {
			*f.v = f.def
		}
	}
	cfg.Steps = slices.Clone(cfg.Steps)
	r := &Reconciler{cfg: cfg, tagKey: key, clock: cfg.Clock, metrics: cfg.Metrics, deps: deps, dependents: dependents,
		stepOf: kinds, mem: newMemory()}
	if r.clock == nil {
		r.clock = clock.RealClock{}
	}
	if r.metrics == nil {
		r.metrics = noMetrics{}
	}
	if cfg.Journal == NoJournal {
		r.cfg.Journal = nil // the host chose to run without one
	} else {
		r.cfg.Journal = boundedJournal{j: cfg.Journal, r: r}
	}
	return r, nil
}

// Check lists the provider's objects once and returns the plan for them
// without changing anything at the provider. An empty plan means a listing
// confirms the desired state. Like a pass, it loads the [Config.Journal]
// first, so a new process's plan holds its predecessor's creations. It
// makes one List attempt, within CallTimeout, and does not retry it: a
// failed List is its error.
func (r *Reconciler) Check(ctx context.Context) (Plan, error) {
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
// it makes one List attempt and does not retry it.
func (r *Reconciler) Observe(ctx context.Context) (*Observation, error) {
	objs, at, err := r.list(onePass(ctx, r.clock.Now()))
	if err != nil {
		return nil, err
	}
	r.memMu.Lock()
	defer r.memMu.Unlock()
	v, err := r.merge(objs, at)
	if err != nil {
		return nil, err
	}
	return v.observation(), nil
}

// ResetFailures forgets every failure count, so that objects that used up
// [Config.FailureBudget] are repaired or recreated again. A host calls it
// when an operator has fixed the cause, or when the desired state changes.
func (r *Reconciler) ResetFailures() {
	r.memMu.Lock()
	defer r.memMu.Unlock()
	clear(r.mem.failures)
}

// Result is the outcome of one [Reconciler.ReconcileOnce] or
// [Reconciler.TeardownOnce] call.
type Result struct {
	// Converged is true when a listing confirmed the desired state (for
	// TeardownOnce: no owned object left): nothing to create, update or
	// destroy, nothing pending, no write unconfirmed.
	Converged bool
	// RequeueAfter is when to call again when not converged: the time after
	// which looking again is useful (growing while nothing changes).
	RequeueAfter time.Duration
	// Plan is what the call found to do, before doing it.
	Plan Plan
	// Transient holds the errors a wait may cure that the pass met: an
	// engine call that failed transiently, timed out or was rate limited.
	// They are not returned as the error: the next call, after
	// RequeueAfter, retries them. Nil when there were none.
	Transient error
}

// ReconcileOnce makes one pass and returns without waiting: it lists,
// makes the changes the listing allows, and reports whether the desired
// state is confirmed or when to call again. Everything a later call needs
// (unconfirmed writes, failure counts, pending times) stays in the
// Reconciler. It is the mode for hosts that run their own requeue loop
// (controller-runtime's RequeueAfter, cloud-provider's RetryError).
//
// It never waits on the clock: each engine call is made once, within
// CallTimeout, and the call takes one List plus at most one round of calls
// per phase (repair, adopt, destroy, create, update; calls inside a phase
// run in parallel, within Parallelism); a List that fails or times out
// ends it at once. The pass as a whole is bounded by CallTimeout: every
// engine and journal call ends by the time the pass has run for
// CallTimeout (a call still running then is cut short and counts as
// timed out: a creation's outcome is unknown and holds its name, as after
// a lost answer), and no call starts with less than a tenth of
// CallTimeout left (the calls left are made by the next call, and a
// creation not sent holds no name). One call thus returns within one
// CallTimeout, however the provider and the journal answer, provided
// they honour their context. A call that fails in a way a wait may cure
// (transient, timed out, rate limited) is not retried inside it: the
// failure is reported in Result.Transient and the host's next call, after
// RequeueAfter, is the retry (RetryBudget and CallAttempts do not apply).
// RequeueAfter then grows from RetryInterval, doubling to MaxPollInterval
// while passes keep meeting such failures, and is never below a
// provider's retry-after hint. A result that is not converged and carries
// no error always has a positive RequeueAfter, also when a deadline (a
// pending or confirmation timeout) passed during the pass.
//
// The error reports what cannot progress by waiting (ErrResourceFailed,
// ErrPendingTimeout, ErrNotDestroyable, ErrInconsistent, permanent engine
// errors); Result is meaningful alongside it.
func (r *Reconciler) ReconcileOnce(ctx context.Context) (Result, error) {
	return r.reconcileOnce(ctx, false)
}

// TeardownOnce is the non-blocking [Reconciler.Teardown]: one pass that
// destroys what the listing allows now (children before parents, each
// parent once a listing shows its children gone), and reports Converged
// once a listing shows no owned object left, or when to call again. It
// shares ReconcileOnce's memory and errors.
func (r *Reconciler) TeardownOnce(ctx context.Context) (Result, error) {
	return r.reconcileOnce(ctx, true)
}

func (r *Reconciler) reconcileOnce(ctx context.Context, down bool) (res Result, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	start := r.clock.Now()
	defer func() { r.metrics.Observe(verbOf(down), classify(err), r.clock.Since(start)) }()
	ctx = onePass(ctx, start)
	if err := r.loadJournal(ctx); err != nil {
		return r.requeueOr(ctx, err)
	}
	listed, listedAt, err := r.list(ctx)
	if err != nil {
		return r.requeueOr(ctx, err)
	}
	p, err := r.pass(ctx, listed, listedAt, down)
	if r.lagging(err, listedAt) {
		return Result{RequeueAfter: r.cfg.PollInterval, Transient: err}, nil
	}
	if err != nil {
		return Result{}, err
	}
	res.Plan = p.public()
	if p.converged() {
		r.requeue, r.retry = 0, 0
		return Result{Converged: true, Plan: res.Plan}, nil
	}
	switch {
	case p.changed || r.requeue == 0:
		r.requeue = r.cfg.PollInterval
	default:
		r.requeue = min(time.Duration(float64(r.requeue)*pollMultiplier), r.cfg.MaxPollInterval)
	}
	res.RequeueAfter = r.requeue
	r.memMu.Lock()
	settled := r.mem.settled()
	newest, unconfirmed := r.mem.newestWrite(r.listings.Load(), r.cfg.ListLagListings > 0)
	r.memMu.Unlock()
	now := r.clock.Now()
	if !settled.IsZero() {
		res.RequeueAfter = max(res.RequeueAfter, settled.Sub(now))
	}
	if !p.changed && unconfirmed && settled.After(newest) && !now.Before(settled) {
		// Slower than learnt: look again after the write's age, as
		// Reconcile does.
		res.RequeueAfter = max(res.RequeueAfter, min(now.Sub(newest), r.cfg.MaxPollInterval))
	}
	if d, ok := p.deadlineAt(); ok {
		// A deadline that passed during the pass (engine calls take
		// time) is acted on by the next call, soon but not at once.
		res.RequeueAfter = min(res.RequeueAfter, max(d.Sub(now), min(r.cfg.RetryInterval, r.cfg.PollInterval)))
	}
	if len(p.retry) > 0 {
		res.Transient = errors.Join(p.retry...)
		res.RequeueAfter = max(res.RequeueAfter, r.nextRetry(p.hint))
	} else {
		r.retry = 0
	}
	return res, p.err()
}

// requeueOr answers a pass that could not start: a failure a wait may
// cure is a requeue after a growing wait (or the provider's hint), any
// other an error. Called with mu held.
func (r *Reconciler) requeueOr(ctx context.Context, err error) (Result, error) {
	if ctx.Err() != nil || !retryable(err) {
		return Result{}, err
	}
	return Result{RequeueAfter: r.nextRetry(retryAfter(err)), Transient: err}, nil
}

// nextRetry returns when to call again after a pass that met failures a
// wait may cure: RetryInterval, doubling over consecutive such passes up
// to MaxPollInterval, or the provider's retry-after hint when longer.
// Called with mu held.
func (r *Reconciler) nextRetry(hint time.Duration) time.Duration {
	if r.retry == 0 {
		r.retry = r.cfg.RetryInterval
	} else {
		r.retry = min(2*r.retry, r.cfg.MaxPollInterval)
	}
	return max(r.retry, hint)
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

	if err := r.loadJournal(ctx); err != nil {
		return err
	}
	var listed []Object
	var listedAt listing
	fresh := false // listed is the last poll's listing
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
