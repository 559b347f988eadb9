package lbrecon

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/utils/clock"

	"github.com/reconkit/reconkit/backoff"
)

// Errors returned by [Reconciler] methods; callers branch on them with
// errors.Is.
var (
	// ErrInvalidConfig is wrapped by New when the configuration is unusable.
	ErrInvalidConfig = errors.New("lbrecon: invalid config")
	// ErrResourceFailed is wrapped when an object keeps failing after it was
	// repaired or recreated [Config.FailureBudget] times in one Reconcile.
	ErrResourceFailed = errors.New("lbrecon: resource keeps failing")
	// ErrPendingTimeout is wrapped when objects stay pending longer than
	// [Config.PendingTimeout].
	ErrPendingTimeout = errors.New("lbrecon: resources still pending")
	// ErrNotDestroyable is wrapped when some objects could not be destroyed
	// and a whole retry round destroyed nothing.
	ErrNotDestroyable = errors.New("lbrecon: resources could not be destroyed")
	// ErrNotConverged is wrapped when Reconcile made [Config.MaxPasses]
	// passes without reaching an empty plan.
	ErrNotConverged = errors.New("lbrecon: plan did not converge")
)

// Defaults used when the corresponding Config field is zero.
const (
	DefaultParallelism     = 16
	DefaultPollInterval    = 500 * time.Millisecond
	DefaultMaxPollInterval = 10 * time.Second
	DefaultPendingTimeout  = 10 * time.Minute
	DefaultGetPollMax      = 1
	DefaultCallAttempts    = 5
	DefaultRetryInterval   = 200 * time.Millisecond
	DefaultFailureBudget   = 3
	DefaultMaxPasses       = 32
)

// Config configures a [Reconciler]. Zero durations and counts take the
// defaults above.
type Config struct {
	// Engine is the provider's API. Required.
	Engine Engine
	// Steps run in this order. Required; kinds must be unique.
	Steps []Step
	// Tag is the ownership tag, "key=value", applied to every object the
	// reconciler creates. Objects carrying another value for the same key
	// belong to someone else and are never touched. Required.
	Tag string
	// Scope is passed to Engine.List (see [Query]).
	Scope string
	// Claim reports whether an untagged object (no tag with Tag's key) is one
	// this reconciler created before it could tag it. Claimed objects are
	// adopted (tagged) when a step keeps them and destroyed otherwise. Nil
	// claims nothing.
	Claim func(Object) bool

	// Parallelism bounds the engine calls in flight inside one phase.
	Parallelism int
	// PollInterval is the first wait before polling pending objects; waits
	// grow by 30% each poll up to MaxPollInterval.
	PollInterval    time.Duration
	MaxPollInterval time.Duration
	// PendingTimeout bounds one wait for pending objects.
	PendingTimeout time.Duration
	// GetPollMax is the largest number of pending objects polled with one
	// Get each; more are polled with one List call instead.
	GetPollMax int
	// CallAttempts bounds the attempts of one engine call that fails
	// transiently or is rate limited. Permanent errors are not retried.
	CallAttempts int
	// RetryInterval is the first wait between attempts of one call (a
	// retry-after hint from the engine replaces it).
	RetryInterval time.Duration
	// FailureBudget is how many times one Reconcile call repairs or
	// recreates the same failed object before it returns ErrResourceFailed.
	FailureBudget int
	// MaxPasses bounds the passes of one Reconcile call.
	MaxPasses int

	// Clock is used for every wait; nil means the real clock.
	Clock clock.Clock
	// Metrics receives call counts and durations; nil means none.
	Metrics Metrics
}

// Reconciler drives an [Engine] towards the state its [Step]s describe.
// Check may run at any time; Reconcile calls on one Reconciler are
// serialised (a second call waits for the first).
type Reconciler struct {
	cfg     Config
	tagKey  string
	clock   clock.Clock
	metrics Metrics
	deps    [][]int // per step: indexes of the steps it depends on
	mu      sync.Mutex
}

// New validates cfg, fills its defaults and returns a Reconciler.
func New(cfg Config) (*Reconciler, error) {
	bad := func(format string, a ...any) (*Reconciler, error) {
		return nil, fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, a...)...)
	}
	if cfg.Engine == nil {
		return bad("Engine is nil")
	}
	if len(cfg.Steps) == 0 {
		return bad("no Steps")
	}
	key := tagKey(cfg.Tag)
	if key == "" || strings.TrimSpace(cfg.Tag) != cfg.Tag {
		return bad("Tag %q must be a non-empty key=value string without surrounding space", cfg.Tag)
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
	for i, st := range cfg.Steps {
		if st.DependsOn == nil {
			for j := range i {
				deps[i] = append(deps[i], j)
			}
			continue
		}
		for _, k := range st.DependsOn {
			j, ok := kinds[k]
			if !ok || j >= i {
				return bad("step %q depends on %q, which is not an earlier step", st.Kind, k)
			}
			deps[i] = append(deps[i], j)
		}
	}
	for _, f := range []struct {
		name string
		v    *time.Duration
		def  time.Duration
	}{
		{"PollInterval", &cfg.PollInterval, DefaultPollInterval},
		{"MaxPollInterval", &cfg.MaxPollInterval, DefaultMaxPollInterval},
		{"PendingTimeout", &cfg.PendingTimeout, DefaultPendingTimeout},
		{"RetryInterval", &cfg.RetryInterval, DefaultRetryInterval},
	} {
		if *f.v < 0 {
			return bad("%s is negative", f.name)
		}
		if *f.v == 0 {
			*f.v = f.def
		}
	}
	if cfg.MaxPollInterval < cfg.PollInterval {
		return bad("MaxPollInterval %v is below PollInterval %v", cfg.MaxPollInterval, cfg.PollInterval)
	}
	for _, f := range []struct {
		name string
		v    *int
		def  int
	}{
		{"Parallelism", &cfg.Parallelism, DefaultParallelism},
		{"GetPollMax", &cfg.GetPollMax, DefaultGetPollMax},
		{"CallAttempts", &cfg.CallAttempts, DefaultCallAttempts},
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
	r := &Reconciler{cfg: cfg, tagKey: key, clock: cfg.Clock, metrics: cfg.Metrics, deps: deps}
	if r.clock == nil {
		r.clock = clock.RealClock{}
	}
	if r.metrics == nil {
		r.metrics = noMetrics{}
	}
	return r, nil
}

// Plan is what one pass would do, as computed by [Reconciler.Check].
type Plan struct {
	// Create holds the objects to create, with the ownership tag set. Only
	// steps none of whose dependencies have creations of their own
	// contribute: objects that refer to objects not created yet come in a
	// later pass.
	Create []Object
	// Destroy holds the objects to destroy, in the order Reconcile destroys
	// them (later steps first).
	Destroy []Object
	// Adopt holds untagged objects left by an interrupted creation that a
	// step keeps; Reconcile tags them.
	Adopt []Object
	// Failed holds kept objects in the failed state; Reconcile repairs or
	// recreates them.
	Failed []Object
	// Pending holds owned objects the provider is still working on;
	// Reconcile waits for them before it changes anything.
	Pending []Object
}

// Empty reports whether the plan has nothing to do, that is whether the
// observed state is the desired one.
func (p Plan) Empty() bool {
	return len(p.Create)+len(p.Destroy)+len(p.Adopt)+len(p.Failed)+len(p.Pending) == 0
}

// plan is Plan with destructions grouped by step.
type plan struct {
	Plan
	destroy [][]Object // by step index
	stepOf  map[string]int
}

// Check lists the provider's objects once and returns the plan for them
// without changing anything. An empty plan means the provider is in the
// desired state.
func (r *Reconciler) Check(ctx context.Context) (Plan, error) {
	objs, err := r.list(ctx)
	if err != nil {
		return Plan{}, err
	}
	p, err := r.compute(ctx, objs)
	if err != nil {
		return Plan{}, err
	}
	return p.Plan, nil
}

// Observe lists the provider's objects once and returns those the
// reconciler manages (owned, or untagged and claimed) grouped by kind,
// without changing anything.
func (r *Reconciler) Observe(ctx context.Context) (*Observation, error) {
	objs, err := r.list(ctx)
	if err != nil {
		return nil, err
	}
	return NewObservation(r.managed(objs)), nil
}

// managed filters listed objects down to the ones this reconciler manages.
func (r *Reconciler) managed(objs []Object) []Object {
	out := make([]Object, 0, len(objs))
	for _, o := range objs {
		if !slices.ContainsFunc(r.cfg.Steps, func(s Step) bool { return s.Kind == o.Kind }) {
			continue
		}
		if r.owns(o) || r.claims(o) {
			out = append(out, o)
		}
	}
	return out
}

func (r *Reconciler) owns(o Object) bool { return o.HasTag(r.cfg.Tag) }

// claims reports whether o is untagged by any owner and claimed by Config.Claim.
func (r *Reconciler) claims(o Object) bool {
	if r.cfg.Claim == nil {
		return false
	}
	for _, t := range o.Tags {
		if tagKey(t) == r.tagKey {
			return false
		}
	}
	return r.cfg.Claim(o)
}

// compute runs the steps over the listed objects.
func (r *Reconciler) compute(ctx context.Context, listed []Object) (*plan, error) {
	mine := r.managed(listed)
	obs := NewObservation(mine)
	p := &plan{destroy: make([][]Object, len(r.cfg.Steps)), stepOf: make(map[string]int, len(r.cfg.Steps))}
	gone := make(map[string]bool)
	wantsCreate := make([]bool, len(r.cfg.Steps))
	blocked := make([]bool, len(r.cfg.Steps))
	view := obs
	for i, st := range r.cfg.Steps {
		p.stepOf[st.Kind] = i
		create, destroy, err := st.Plan(ctx, view)
		if err != nil {
			return nil, fmt.Errorf("lbrecon: step %q: %w", st.Kind, err)
		}
		for _, c := range create {
			if c.Kind != st.Kind || c.Name == "" {
				return nil, fmt.Errorf("lbrecon: step %q wants to create %v: kind must be %q and name non-empty", st.Kind, c, st.Kind)
			}
		}
		for _, d := range destroy {
			if _, ok := obs.ByID(d.ID); !ok || d.ID == "" {
				return nil, fmt.Errorf("lbrecon: step %q wants to destroy %v, which is not an observed object", st.Kind, d)
			}
		}
		for _, j := range r.deps[i] {
			if wantsCreate[j] || blocked[j] {
				blocked[i] = true
			}
		}
		wantsCreate[i] = len(create) > 0
		if !blocked[i] {
			for _, c := range create {
				c = c.clone()
				c.ID, c.State = "", 0
				if !c.HasTag(r.cfg.Tag) {
					c.Tags = append(c.Tags, r.cfg.Tag)
				}
				p.Create = append(p.Create, c)
			}
		}
		if len(destroy) > 0 {
			p.destroy[i] = destroy
			for _, d := range destroy {
				gone[d.ID] = true
			}
			view = obs.without(gone)
		}
	}
	for i := len(p.destroy) - 1; i >= 0; i-- {
		p.Destroy = append(p.Destroy, p.destroy[i]...)
	}
	for _, o := range mine {
		switch {
		case o.State != StateOK && o.State != StateFailed:
			p.Pending = append(p.Pending, o)
		case gone[o.ID]:
		case o.State == StateFailed:
			p.Failed = append(p.Failed, o)
		}
		if !gone[o.ID] && !r.owns(o) {
			p.Adopt = append(p.Adopt, o)
		}
	}
	return p, nil
}

// Reconcile changes the provider's objects until Check would return an empty
// plan. Each pass lists once, waits for pending objects, repairs or recreates
// failed ones (within [Config.FailureBudget]), adopts untagged leftovers,
// destroys (later steps first, retrying while a round makes progress),
// creates, and waits for the created objects to leave pending. It returns nil
// once the plan is empty, an error wrapping ctx.Err() when ctx ends, and a
// wrapped error otherwise; objects changed before an error stay changed and
// the next call carries on from them.
func (r *Reconciler) Reconcile(ctx context.Context) (err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	start := r.clock.Now()
	defer func() { r.metrics.Observe(VerbReconcile, classify(err), r.clock.Since(start)) }()
	log := logr.FromContextOrDiscard(ctx).WithValues("scope", r.cfg.Scope)

	failures := make(map[string]int)
	var listed []Object
	fresh := false
	for pass := 1; ; pass++ {
		if pass > r.cfg.MaxPasses {
			return fmt.Errorf("%w after %d passes", ErrNotConverged, r.cfg.MaxPasses)
		}
		if !fresh {
			if listed, err = r.list(ctx); err != nil {
				return err
			}
		}
		fresh = false
		p, err := r.compute(ctx, listed)
		if err != nil {
			return err
		}
		if len(p.Pending) > 0 {
			log.V(1).Info("waiting for pending objects", "count", len(p.Pending))
			if listed, fresh, err = r.waitPending(ctx, p.Pending); err != nil {
				return err
			}
			continue
		}
		if p.Empty() {
			log.V(1).Info("reconciled", "passes", pass)
			return nil
		}
		log.V(1).Info("applying plan", "pass", pass, "create", len(p.Create), "destroy", len(p.Destroy),
			"adopt", len(p.Adopt), "failed", len(p.Failed))

		// Failed objects: repair in place first where the engine can, then
		// recreate, within the budget.
		var repair []Object
		for _, f := range p.Failed {
			key := f.Kind + "/" + f.Name
			failures[key]++
			if failures[key] > r.cfg.FailureBudget {
				return fmt.Errorf("%w: %v failed again after %d repairs or recreations", ErrResourceFailed, f, r.cfg.FailureBudget)
			}
			if _, ok := r.cfg.Engine.(Repairer); ok && failures[key] == 1 {
				repair = append(repair, f)
				continue
			}
			log.Info("recreating failed object", "object", f.String(), "attempt", failures[key])
			i := p.stepOf[f.Kind]
			p.destroy[i] = append(p.destroy[i], f)
		}
		var waiting []Object
		if len(repair) > 0 {
			repaired, errs := r.parallel(ctx, repair, VerbRepair, func(ctx context.Context, o Object) (Object, error) {
				return r.cfg.Engine.(Repairer).Repair(ctx, o)
			})
			for i, e := range errs {
				switch {
				case e == nil:
					log.Info("repairing failed object in place", "object", repair[i].String())
					waiting = append(waiting, repaired[i])
				case errors.Is(e, ErrNotSupported):
					j := p.stepOf[repair[i].Kind]
					p.destroy[j] = append(p.destroy[j], repair[i])
				default:
					return fmt.Errorf("lbrecon: repair %v: %w", repair[i], e)
				}
			}
		}
		if len(p.Adopt) > 0 {
			_, errs := r.parallel(ctx, p.Adopt, VerbTag, func(ctx context.Context, o Object) (Object, error) {
				return o, r.cfg.Engine.Tag(ctx, o, []string{r.cfg.Tag})
			})
			if err := joinErrs("adopt", p.Adopt, errs); err != nil {
				return err
			}
			log.Info("adopted untagged objects", "count", len(p.Adopt))
		}
		if err := r.destroy(ctx, p.destroy); err != nil {
			return err
		}
		if len(p.Create) > 0 {
			created, errs := r.parallel(ctx, p.Create, VerbCreate, r.cfg.Engine.Create)
			if err := joinErrs("create", p.Create, errs); err != nil {
				return err
			}
			for _, c := range created {
				if c.State != StateOK && c.State != StateFailed {
					waiting = append(waiting, c)
				}
			}
		}
		if len(waiting) > 0 {
			if listed, fresh, err = r.waitPending(ctx, waiting); err != nil {
				return err
			}
		}
	}
}

// engineList lists the owned objects once; ErrNotFound from the engine
// means nothing matched.
func (r *Reconciler) engineList(ctx context.Context) ([]Object, error) {
	objs, err := r.cfg.Engine.List(ctx, Query{Tag: r.cfg.Tag, Scope: r.cfg.Scope})
	if errors.Is(err, ErrNotFound) {
		return nil, nil
	}
	return objs, err
}

// list calls Engine.List with retries.
func (r *Reconciler) list(ctx context.Context) ([]Object, error) {
	var objs []Object
	err := r.call(ctx, VerbList, func(ctx context.Context) error {
		var err error
		objs, err = r.engineList(ctx)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("lbrecon: list: %w", err)
	}
	return objs, nil
}

// destroy destroys by step, later steps first, and retries the failures in
// rounds while a round destroys something.
func (r *Reconciler) destroy(ctx context.Context, byStep [][]Object) error {
	remaining := make([][]Object, len(byStep))
	copy(remaining, byStep)
	for round := 1; ; round++ {
		progress, left := false, 0
		var errs []error
		for i := len(remaining) - 1; i >= 0; i-- {
			objs := remaining[i]
			if len(objs) == 0 {
				continue
			}
			_, es := r.parallel(ctx, objs, VerbDestroy, func(ctx context.Context, o Object) (Object, error) {
				err := r.cfg.Engine.Destroy(ctx, o)
				if errors.Is(err, ErrNotFound) {
					err = nil
				}
				return o, err
			})
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("lbrecon: destroy: %w", err)
			}
			var failed []Object
			for j, e := range es {
				if e == nil {
					progress = true
					continue
				}
				failed = append(failed, objs[j])
				errs = append(errs, fmt.Errorf("%v: %w", objs[j], e))
			}
			remaining[i] = failed
			left += len(failed)
		}
		if left == 0 {
			return nil
		}
		if !progress {
			return fmt.Errorf("%w (%d left after %d rounds): %w", ErrNotDestroyable, left, round, errors.Join(errs...))
		}
		logr.FromContextOrDiscard(ctx).V(1).Info("retrying destructions after progress", "left", left)
	}
}

// pollMultiplier is the growth of the wait between polls. It is low on
// purpose: a poll is one List for many objects, and a wait that overshoots the
// provider's pending period adds to every creation wave.
const pollMultiplier = 1.3

// waitPending polls until none of objs is pending any more (failed or gone
// counts as done: the next pass deals with them). The first poll comes one
// PollInterval after the call; waits grow by pollMultiplier up to
// MaxPollInterval, and the whole wait ends with ErrPendingTimeout after
// PendingTimeout. When the last poll was a List, it returns that listing and
// fresh=true.
func (r *Reconciler) waitPending(ctx context.Context, objs []Object) (listed []Object, fresh bool, err error) {
	waiting := make(map[string]Object, len(objs))
	for _, o := range objs {
		waiting[o.Kind+"\x00"+o.ID] = o
	}
	poll := func(ctx context.Context) (bool, error) {
		listed, fresh = nil, false
		if len(waiting) > r.cfg.GetPollMax {
			var objs []Object
			err := r.once(ctx, VerbList, func(ctx context.Context) error {
				var err error
				objs, err = r.engineList(ctx)
				return err
			})
			if err != nil {
				return false, err
			}
			seen := make(map[string]Object, len(objs))
			for _, o := range objs {
				seen[o.Kind+"\x00"+o.ID] = o
			}
			for k := range waiting {
				if o, ok := seen[k]; !ok || o.State == StateOK || o.State == StateFailed {
					delete(waiting, k)
				}
			}
			listed, fresh = objs, true
		} else {
			pending := make([]Object, 0, len(waiting))
			for _, o := range waiting {
				pending = append(pending, o)
			}
			got, errs := r.parallelOnce(ctx, pending, VerbGet, r.cfg.Engine.Get)
			for i, e := range errs {
				k := pending[i].Kind + "\x00" + pending[i].ID
				switch {
				case errors.Is(e, ErrNotFound):
					delete(waiting, k)
				case e != nil:
					return false, e
				case got[i].State == StateOK || got[i].State == StateFailed:
					delete(waiting, k)
				}
			}
		}
		return len(waiting) == 0, nil
	}
	err = backoff.Poll(ctx, r.cfg.PollInterval, r.cfg.PendingTimeout, poll,
		backoff.WithDelayedStart(),
		backoff.WithClock(r.clock),
		backoff.WithMaxInterval(r.cfg.MaxPollInterval),
		backoff.WithMultiplier(pollMultiplier),
		backoff.WithName("lbrecon: wait for pending objects"),
	)
	if err != nil {
		if ctx.Err() == nil && errors.Is(err, backoff.ErrGaveUp) {
			still := make([]string, 0, len(waiting))
			for _, o := range waiting {
				still = append(still, o.String())
			}
			slices.Sort(still)
			return nil, false, fmt.Errorf("%w after %v: %s: %w", ErrPendingTimeout, r.cfg.PendingTimeout, strings.Join(still, ", "), err)
		}
		return nil, false, fmt.Errorf("lbrecon: wait for pending objects: %w", err)
	}
	return listed, fresh, nil
}

// once makes one engine call and reports it to the metrics.
func (r *Reconciler) once(ctx context.Context, verb Verb, fn func(context.Context) error) error {
	t := r.clock.Now()
	err := fn(ctx)
	r.metrics.Observe(verb, classify(err), r.clock.Since(t))
	return err
}

// call makes an engine call, retrying transient and rate-limited failures up
// to CallAttempts times. Not-found and unsupported answers are final.
func (r *Reconciler) call(ctx context.Context, verb Verb, fn func(context.Context) error) error {
	return backoff.Retry(ctx, func(ctx context.Context) error {
		err := r.once(ctx, verb, fn)
		if errors.Is(err, ErrNotFound) || errors.Is(err, ErrNotSupported) {
			return backoff.Permanent(err)
		}
		return err
	},
		backoff.WithClock(r.clock),
		backoff.WithMaxAttempts(r.cfg.CallAttempts),
		backoff.WithInitialInterval(r.cfg.RetryInterval),
		backoff.WithName("lbrecon: "+string(verb)),
	)
}

// parallel applies fn to every object through call, at most Parallelism at
// a time, and returns results and errors by index. It returns once every
// call it started has returned.
func (r *Reconciler) parallel(ctx context.Context, objs []Object, verb Verb, fn func(context.Context, Object) (Object, error)) ([]Object, []error) {
	return r.fanOut(ctx, objs, func(ctx context.Context, o Object) (Object, error) {
		var got Object
		err := r.call(ctx, verb, func(ctx context.Context) error {
			var err error
			got, err = fn(ctx, o.clone())
			return err
		})
		return got, err
	})
}

// parallelOnce is parallel without retries (the caller's loop retries).
func (r *Reconciler) parallelOnce(ctx context.Context, objs []Object, verb Verb, fn func(context.Context, Object) (Object, error)) ([]Object, []error) {
	return r.fanOut(ctx, objs, func(ctx context.Context, o Object) (Object, error) {
		var got Object
		err := r.once(ctx, verb, func(ctx context.Context) error {
			var err error
			got, err = fn(ctx, o.clone())
			return err
		})
		return got, err
	})
}

func (r *Reconciler) fanOut(ctx context.Context, objs []Object, fn func(context.Context, Object) (Object, error)) ([]Object, []error) {
	out := make([]Object, len(objs))
	errs := make([]error, len(objs))
	n := min(r.cfg.Parallelism, len(objs))
	if n <= 1 {
		for i, o := range objs {
			if err := ctx.Err(); err != nil {
				errs[i] = err
				continue
			}
			out[i], errs[i] = fn(ctx, o)
		}
		return out, errs
	}
	var wg sync.WaitGroup
	next := make(chan int)
	for range n {
		wg.Go(func() {
			for i := range next {
				out[i], errs[i] = fn(ctx, objs[i])
			}
		})
	}
	for i := range objs {
		if ctx.Err() != nil {
			errs[i] = ctx.Err()
			continue
		}
		next <- i
	}
	close(next)
	wg.Wait()
	return out, errs
}

// joinErrs wraps the errors of a phase with the objects they belong to.
func joinErrs(what string, objs []Object, errs []error) error {
	var all []error
	for i, e := range errs {
		if e != nil {
			all = append(all, fmt.Errorf("%v: %w", objs[i], e))
		}
	}
	if len(all) == 0 {
		return nil
	}
	return fmt.Errorf("lbrecon: %s %d of %d objects: %w", what, len(all), len(objs), errors.Join(all...))
}
