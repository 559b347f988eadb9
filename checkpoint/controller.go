package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/sync/errgroup"
	"k8s.io/utils/clock"

	"github.com/reconkit/reconkit/backoff"
	"github.com/reconkit/reconkit/internal/event"
)

// Errors of the Controller.
var (
	// ErrInvalidLocal marks a local configuration that fails validation.
	// It is the one failure Bootstrap does not fall back from.
	ErrInvalidLocal = errors.New("checkpoint: local configuration is invalid")
	// ErrInvalidConfig marks an assigned payload that does not parse or
	// validate. Assign stores nothing in that case.
	ErrInvalidConfig = errors.New("checkpoint: assigned configuration is invalid")
	// ErrRejected marks an assignment of a payload that was rolled back
	// from before (the refusal is keyed by payload hash and persisted).
	ErrRejected = errors.New("checkpoint: payload was rolled back before and is rejected")
	// ErrNoTrial marks a Confirm or Rollback while no configuration is on
	// trial.
	ErrNoTrial = errors.New("checkpoint: no configuration is on trial")
	// ErrNotBootstrapped marks a call that needs Bootstrap first.
	ErrNotBootstrapped = errors.New("checkpoint: controller not bootstrapped")
	// ErrRunning marks a second concurrent call to Run.
	ErrRunning = errors.New("checkpoint: controller already running")
)

// Reasons of the ConfigOK condition. Failure reasons name the step that
// failed; the message names the checkpoint and the error.
const (
	ReasonLocal            = "LocalConfig"            // nothing assigned; local config runs
	ReasonTrial            = "AssignedOnTrial"        // assigned config runs, trial ongoing
	ReasonLastKnownGood    = "AssignedLastKnownGood"  // assigned config passed its trial
	ReasonStoreUnavailable = "StoreUnavailable"       // the store could not be opened or read
	ReasonLoadFailed       = "AssignedLoadFailed"     // the assigned checkpoint did not load
	ReasonParseFailed      = "AssignedParseFailed"    // the assigned payload did not parse
	ReasonValidateFailed   = "AssignedValidateFailed" // the assigned config did not validate
	ReasonProbeFailed      = "TrialProbeFailed"       // the health probe failed during the trial
	ReasonLKGFailed        = "LastKnownGoodFailed"    // last-known-good also failed; local runs
	ReasonCrashLoop        = "TrialCrashLoop"         // the trial did not finish within MaxTrialStarts starts
	ReasonManualRollback   = "RolledBackManually"     // Controller.Rollback ended the trial
	ReasonSourceInvalid    = "AssignedSourceInvalid"  // the source gave no usable checkpoint ID
)

// Defaults of Config.
const (
	DefaultTrialDuration  = 10 * time.Minute
	DefaultCheckInterval  = 10 * time.Second
	DefaultMaxTrialStarts = 3
)

const (
	stepLoad     = "load"
	stepParse    = "parse"
	stepValidate = "validate"
)

// Phase says which configuration runs and why.
type Phase string

// Phases of a Controller.
const (
	// PhaseLocal: nothing is assigned; the local configuration runs.
	PhaseLocal Phase = "Local"
	// PhaseTrial: the assigned checkpoint runs on trial.
	PhaseTrial Phase = "Trial"
	// PhaseLastKnownGood: the assigned checkpoint passed its trial.
	PhaseLastKnownGood Phase = "LastKnownGood"
	// PhaseRolledBack: the assigned checkpoint failed; last-known-good (or
	// the local configuration) runs instead.
	PhaseRolledBack Phase = "RolledBack"
)

// Status is what the Controller decided: the configuration to run and the
// condition to report.
type Status[T any] struct {
	// Config is the configuration the host should run now.
	Config T
	// ID is Config's checkpoint ID, "" for the local configuration.
	ID string
	// Phase says why Config runs.
	Phase Phase
	// Assigned is the current (assigned) checkpoint ID, which differs from
	// ID after a rollback.
	Assigned string
	// TrialStart is when this process started the trial of Assigned, in
	// PhaseTrial. The trial is timed from it on the monotonic clock.
	TrialStart time.Time
	// TriesLeft is how many more starts of its trial Assigned gets, in
	// PhaseTrial.
	TriesLeft int
	// Condition is the ConfigOK condition to publish.
	Condition Condition
}

// Config configures a [Controller] over the host's configuration type T.
type Config[T any] struct {
	// Store keeps checkpoints. Required.
	Store LKGStore
	// Parse turns a payload into a configuration. Required.
	Parse func([]byte) (T, error)
	// Validate checks a configuration. Required.
	Validate func(T) error
	// Local is the host's own configuration (defaults or a file). It must
	// validate; it runs when nothing is assigned and is the last resort.
	Local T
	// TrialDuration is how long an assigned configuration must run, with
	// the probe passing, before it becomes last-known-good. It is time this
	// process observed on the monotonic clock: a restart starts the trial
	// again, and neither downtime nor a wall-clock jump counts. 0 means
	// DefaultTrialDuration; negative is rejected.
	TrialDuration time.Duration
	// MaxTrialStarts is how many times a trial may start (at Assign, and at
	// every Bootstrap that resumes it) before the configuration is rolled
	// back as a crash loop, as systemd's boot assessment counts tries. The
	// count is persisted before each start. 0 means
	// DefaultMaxTrialStarts.
	MaxTrialStarts int
	// CheckInterval is how often Run checks a trial. 0 means
	// DefaultCheckInterval.
	CheckInterval time.Duration
	// Probe, if set, checks the host's health while a configuration is on
	// trial. Run calls it at every check during a trial, from Run's
	// goroutine, never concurrently with itself; a configuration graduates
	// only if every call since this process started the trial returned
	// nil, the last one after TrialDuration had passed, and the first
	// error rolls back to last-known-good. It must return when ctx ends.
	Probe func(ctx context.Context, cfg T) error
	// OnStatus, if set, is told about every change of Status. Run calls it
	// from one goroutine of its own, never concurrently with itself and
	// never from the trial loop, which does not wait for it: if OnStatus is
	// slow, intermediate statuses are skipped and it receives the newest.
	// Changes made before Run starts are delivered when it starts (the
	// newest one). It must return when Run's context ends.
	OnStatus func(Status[T])
	// Source, if set, is watched by Run; what it delivers is passed to
	// Assign, and a refusal or failure is reported in the condition.
	Source ConfigSource
	// Conditions, if set, receives the ConfigOK condition at Bootstrap and
	// at every change; see [ConditionReporter] for when and from where. A
	// node-status provider with a ReportCondition method plugs in here.
	Conditions ConditionReporter
	// Metrics, if set, receives the controller's observations (phase,
	// trials, confirmations, rollbacks); see [Metrics]. nil means none.
	Metrics Metrics
	// Events, if set, receives an event when a trial starts
	// (Normal EventReasonTrialStarted), when a configuration is confirmed
	// (Normal EventReasonConfirmed) and when one is rolled back (Warning
	// EventReasonRolledBack, with the condition's reason and message).
	// nil means none.
	Events EventRecorder
	// Clock is the time source; nil means the real clock.
	Clock clock.Clock
}

// Controller runs assigned configuration with a trial and rolls back to the
// last-known-good configuration when it fails. Bootstrap it once at
// start-up, then Run it; Assign, Confirm, Rollback and Status may be called
// from any goroutine.
type Controller[T any] struct {
	cfg   Config[T]
	clock clock.Clock

	mu           sync.Mutex
	bootstrapped bool
	running      bool
	status       Status[T]
	st           State     // the state record as this controller wants it
	dirty        bool      // st could not be written; retried at every check
	activeHash   string    // payload hash of the running checkpoint
	trial        uint64    // increments whenever the trial changes
	trialStart   time.Time // c.clock.Now() when this process started the trial
	notify       func()    // what decide leaves to report once Bootstrap set the status
	statuses     event.Value[Status[T]]
}

// New returns a Controller for cfg, filling defaults and rejecting bad
// values, a Local configuration that fails Validate included
// (ErrInvalidLocal).
func New[T any](cfg Config[T]) (*Controller[T], error) {
	var errs []error
	if cfg.Store == nil {
		errs = append(errs, errors.New("missing Store"))
	}
	if cfg.Parse == nil {
		errs = append(errs, errors.New("missing Parse"))
	}
	if cfg.Validate == nil {
		errs = append(errs, errors.New("missing Validate"))
	} else if err := cfg.Validate(cfg.Local); err != nil {
		// Found here rather than at Bootstrap, where a host would learn
		// of a bad default only once the process runs.
		errs = append(errs, fmt.Errorf("%w: %w", ErrInvalidLocal, err))
	}
	for name, d := range map[string]*time.Duration{
		"TrialDuration": &cfg.TrialDuration,
		"CheckInterval": &cfg.CheckInterval,
	} {
		if *d < 0 {
			errs = append(errs, fmt.Errorf("%s is %v, must not be negative", name, *d))
		}
	}
	if cfg.MaxTrialStarts < 0 {
		errs = append(errs, fmt.Errorf("MaxTrialStarts is %d, must not be negative", cfg.MaxTrialStarts))
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("checkpoint: invalid controller config: %w", errors.Join(errs...))
	}
	if cfg.TrialDuration == 0 {
		cfg.TrialDuration = DefaultTrialDuration
	}
	if cfg.CheckInterval == 0 {
		cfg.CheckInterval = DefaultCheckInterval
	}
	if cfg.MaxTrialStarts == 0 {
		cfg.MaxTrialStarts = DefaultMaxTrialStarts
	}
	clk := cfg.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &Controller[T]{cfg: cfg, clock: clk}, nil
}

// Status returns the newest status. Before Bootstrap it is the zero Status.
func (c *Controller[T]) Status() Status[T] {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.status
}

// WaitFor waits until cond holds for the controller's status, and returns
// that status. It sees every status the controller publishes from
// Bootstrap on (the newest one, if several came while cond ran), so it
// needs no polling; it gives up when ctx ends (give it a deadline) with an
// error that wraps ctx.Err() and shows the status last seen. Tests and
// hosts use it to wait for an assignment to be tried, confirmed or rolled
// back.
func (c *Controller[T]) WaitFor(ctx context.Context, cond func(Status[T]) bool) (Status[T], error) {
	w := c.statuses.Watch()
	defer w.Close()
	var last Status[T]
	seen := false
	for {
		st, err := w.Get(ctx)
		if err != nil {
			if !seen {
				return last, fmt.Errorf("checkpoint: wait: no status yet (not bootstrapped): %w", err)
			}
			return last, fmt.Errorf("checkpoint: wait: condition not met; last status: phase %s, checkpoint %q, %s %s: %w",
				last.Phase, last.ID, last.Condition.Reason, last.Condition.Message, err)
		}
		last, seen = st, true
		if cond(st) {
			return st, nil
		}
	}
}

// Bootstrap decides which configuration to run, in the order of the
// kubelet's dynamic configuration: validate the local configuration (an
// error if invalid), open the store, then load, parse and validate the
// assigned checkpoint; if any step fails, or the assigned payload was
// rolled back before, do the same for the last-known-good checkpoint, and if
// that fails too, or nothing is assigned, use the local configuration.
// Failures never stop the host: they are reported in the ConfigOK condition
// with a reason naming the failing step and a message naming the
// checkpoint, and recorded in the store so that they survive restarts.
//
// If the assigned checkpoint is on trial, Bootstrap starts the trial again
// (timed from now) after persisting that one more start was used; when no
// start is left, the configuration is rolled back as a crash loop. If the
// start cannot be recorded, the trial does not start.
//
// The only errors are ErrInvalidLocal and the end of ctx.
func (c *Controller[T]) Bootstrap(ctx context.Context) (Status[T], error) {
	log := logr.FromContextOrDiscard(ctx)
	if err := c.cfg.Validate(c.cfg.Local); err != nil {
		return Status[T]{}, fmt.Errorf("%w: %w", ErrInvalidLocal, err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	st, err := c.decide(ctx)
	if err != nil {
		return Status[T]{}, err
	}
	if st.Condition.Status == ConditionFalse {
		log.Error(nil, "assigned configuration not used", "reason", st.Condition.Reason, "message", st.Condition.Message)
	} else {
		log.Info("configuration chosen", "id", st.ID, "phase", st.Phase)
	}
	c.bootstrapped = true
	c.trial++
	c.setStatus(st)
	if c.notify != nil {
		c.notify()
		c.notify = nil
	}
	return c.status, nil
}

// decide does the work of Bootstrap; c.mu is held.
func (c *Controller[T]) decide(ctx context.Context) (Status[T], error) {
	s := c.cfg.Store
	log := logr.FromContextOrDiscard(ctx)
	unavailable := func(msg string) Status[T] {
		return Status[T]{Config: c.cfg.Local, Phase: PhaseRolledBack,
			Condition: condition(ConditionFalse, ReasonStoreUnavailable, msg)}
	}
	if err := s.Initialize(ctx); err != nil {
		if ctx.Err() != nil {
			return Status[T]{}, ctx.Err()
		}
		return unavailable(fmt.Sprintf("failed to open the checkpoint store: %v; using the local configuration", err)), nil
	}
	st, err := s.State(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return Status[T]{}, ctx.Err()
		}
		return unavailable(fmt.Sprintf("failed to read which checkpoint is assigned: %v; using the local configuration", err)), nil
	}
	c.st, c.activeHash = st, ""
	if st.Assigned == "" {
		c.setActive(ctx, "")
		return Status[T]{Config: c.cfg.Local, Phase: PhaseLocal,
			Condition: condition(ConditionTrue, ReasonLocal, "no configuration assigned; using the local configuration")}, nil
	}
	cur := st.Assigned
	if f, bad := st.RejectedHash(st.AssignedHash); bad {
		// Rolled back before: stay rolled back, for the same reason.
		next, err := c.fallback(ctx, cur, f.Reason, f.Message)
		if err != nil {
			return Status[T]{}, err
		}
		c.setActive(ctx, next.ID)
		return next, nil
	}
	cfg, hash, step, err := c.load(ctx, cur, st.AssignedHash)
	if err != nil {
		if ctx.Err() != nil {
			return Status[T]{}, ctx.Err()
		}
		reason := stepReason(step)
		why := fmt.Sprintf("failed to %s assigned checkpoint %q: %v", step, cur, err)
		f := Failure{Hash: st.AssignedHash, ID: cur, Reason: reason, Message: why, At: c.clock.Now()}
		if step == stepLoad {
			// The file is damaged, not the payload: the same payload
			// assigned again may be saved and tried.
			c.st.Error = &f
		} else {
			c.st = c.st.Reject(f)
		}
		next, err := c.fallback(ctx, cur, reason, why)
		if err != nil {
			return Status[T]{}, err
		}
		c.st.Active, c.st.TriesLeft = next.ID, 0
		c.persist(ctx, log, "record the failed assignment")
		c.notify = func() { c.rolledBack(cur, reason, 0) }
		return next, nil
	}
	out := Status[T]{Config: cfg, ID: cur, Assigned: cur}
	if cur == st.LastKnownGood {
		c.activeHash = hash
		c.setActive(ctx, cur)
		out.Phase = PhaseLastKnownGood
		out.Condition = condition(ConditionTrue, ReasonLastKnownGood, fmt.Sprintf("using assigned checkpoint %q, which is last-known-good", cur))
		return out, nil
	}
	if st.TriesLeft <= 0 {
		why := fmt.Sprintf("checkpoint %q did not pass its %v trial within %d starts (crash loop)", cur, c.cfg.TrialDuration, c.cfg.MaxTrialStarts)
		c.st = c.st.Reject(Failure{Hash: st.AssignedHash, ID: cur, Reason: ReasonCrashLoop, Message: why, At: c.clock.Now()})
		next, err := c.fallback(ctx, cur, ReasonCrashLoop, why)
		if err != nil {
			return Status[T]{}, err
		}
		c.st.Active = next.ID
		c.persist(ctx, log, "record the crash-loop rollback")
		c.notify = func() { c.rolledBack(cur, ReasonCrashLoop, 0) }
		return next, nil
	}
	// Record the start before starting: a crash from here on counts.
	next := c.st.clone()
	next.TriesLeft--
	next.Active, next.Error = cur, nil
	if err := s.SetState(ctx, next); err != nil {
		if ctx.Err() != nil {
			return Status[T]{}, ctx.Err()
		}
		why := fmt.Sprintf("cannot record the start of the trial of checkpoint %q: %v", cur, err)
		fb, ferr := c.fallback(ctx, cur, ReasonStoreUnavailable, why)
		if ferr != nil {
			return Status[T]{}, ferr
		}
		c.notify = func() { c.rolledBack(cur, ReasonStoreUnavailable, 0) }
		return fb, nil
	}
	c.st, c.activeHash = next, hash
	c.trialStart = c.clock.Now()
	out.Phase, out.TrialStart, out.TriesLeft = PhaseTrial, c.trialStart, next.TriesLeft
	out.Condition = condition(ConditionTrue, ReasonTrial, c.trialMessage(cur))
	c.notify = c.trialStarted
	return out, nil
}

func (c *Controller[T]) trialMessage(id string) string {
	return fmt.Sprintf("using assigned checkpoint %q on trial since %s (%d more starts allowed)",
		id, c.trialStart.UTC().Format(time.RFC3339), c.st.TriesLeft)
}

// setActive records id as active if it is not yet; c.mu is held.
func (c *Controller[T]) setActive(ctx context.Context, id string) {
	if c.st.Active == id && !c.dirty {
		return
	}
	c.st.Active = id
	c.persist(ctx, logr.FromContextOrDiscard(ctx), "record the active configuration")
}

// persist writes c.st; a failure is logged and retried at the next check.
func (c *Controller[T]) persist(ctx context.Context, log logr.Logger, what string) {
	if err := c.cfg.Store.SetState(ctx, c.st); err != nil {
		c.dirty = true
		log.Error(err, "failed to "+what+"; will retry")
		return
	}
	c.dirty = false
}

// fallback returns the status after assigned checkpoint cur failed: the
// last-known-good configuration, or the local one if that fails too or is
// cur itself.
func (c *Controller[T]) fallback(ctx context.Context, cur, reason, why string) (Status[T], error) {
	lkg := c.st.LastKnownGood
	if lkg == "" || lkg == cur {
		return Status[T]{Config: c.cfg.Local, Phase: PhaseRolledBack, Assigned: cur,
			Condition: condition(ConditionFalse, reason, why+"; using the local configuration")}, nil
	}
	cfg, hash, step, err := c.load(ctx, lkg, c.st.LastKnownGoodHash)
	if err != nil {
		if ctx.Err() != nil {
			return Status[T]{}, ctx.Err()
		}
		c.activeHash = ""
		return Status[T]{Config: c.cfg.Local, Phase: PhaseRolledBack, Assigned: cur,
			Condition: condition(ConditionFalse, ReasonLKGFailed,
				fmt.Sprintf("%s; then failed to %s last-known-good checkpoint %q: %v; using the local configuration", why, step, lkg, err))}, nil
	}
	c.activeHash = hash
	return Status[T]{Config: cfg, ID: lkg, Phase: PhaseRolledBack, Assigned: cur,
		Condition: condition(ConditionFalse, reason, fmt.Sprintf("%s; using last-known-good checkpoint %q", why, lkg))}, nil
}

// load loads, parses and validates checkpoint id, naming the step that
// failed. wantHash, if set, must match the stored payload.
func (c *Controller[T]) load(ctx context.Context, id, wantHash string) (cfg T, hash, step string, err error) {
	cp, err := c.cfg.Store.Load(ctx, id)
	if err != nil {
		return cfg, "", stepLoad, err
	}
	if wantHash != "" && cp.Hash != wantHash {
		return cfg, "", stepLoad, fmt.Errorf("payload hash %s, the state record says %s: %w", cp.Hash, wantHash, ErrCorrupt)
	}
	cfg, err = c.cfg.Parse(cp.Payload)
	if err != nil {
		return cfg, "", stepParse, err
	}
	if err := c.cfg.Validate(cfg); err != nil {
		return cfg, "", stepValidate, err
	}
	return cfg, cp.Hash, "", nil
}

func stepReason(step string) string {
	switch step {
	case stepParse:
		return ReasonParseFailed
	case stepValidate:
		return ReasonValidateFailed
	default:
		return ReasonLoadFailed
	}
}

// Assign makes payload the assigned configuration: it parses and validates
// it (failures wrap ErrInvalidConfig and store nothing), saves it as
// checkpoint src.ID() (or [HashID] when src has no UID, or when src.ID()
// already names a checkpoint with other content), records it as
// assigned with MaxTrialStarts-1 starts left, and starts its trial, timed
// from now. The returned Status holds the parsed configuration; the host
// applies it (or restarts, after which Bootstrap starts the trial again).
//
// Assigning the payload that runs changes nothing. A payload equal to the
// last-known-good one needs no trial and clears a failure at once. A
// payload that was rolled back before, under any checkpoint ID, is refused
// with ErrRejected, and the condition says why.
func (c *Controller[T]) Assign(ctx context.Context, payload []byte, src Source) (Status[T], error) {
	hash := HashPayload(payload)
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.bootstrapped {
		return Status[T]{}, ErrNotBootstrapped
	}
	log := logr.FromContextOrDiscard(ctx)
	id := HashID(payload)
	if src.UID != "" {
		var err error
		if id, err = src.ID(); err != nil {
			st := c.status
			st.Condition = condition(ConditionFalse, ReasonSourceInvalid,
				fmt.Sprintf("configuration from %s has no usable checkpoint ID: %v; still using %s", src.Origin, err, describe(c.status.ID)))
			c.setStatus(st)
			return c.status, fmt.Errorf("assign: %w", err)
		}
	}
	if c.status.Phase != PhaseRolledBack && hash == c.activeHash && (c.status.ID != "" || c.st.Assigned != "") {
		if c.status.Condition.Status == ConditionFalse {
			// An invalid or refused assignment came in between; the
			// running payload is assigned again.
			st := c.status
			st.Condition = c.okCondition(st)
			c.setStatus(st)
		}
		return c.status, nil
	}
	if f, bad := c.st.RejectedHash(hash); bad {
		st := c.status
		st.Condition = condition(ConditionFalse, f.Reason,
			fmt.Sprintf("configuration %q from %s has the payload of checkpoint %q, rolled back before: %s; still using %s",
				id, src.Origin, f.ID, f.Message, describe(c.status.ID)))
		c.setStatus(st)
		return c.status, fmt.Errorf("assign %q: %w: %s", id, ErrRejected, f.Message)
	}
	cfg, err := c.cfg.Parse(payload)
	reason, step := ReasonParseFailed, stepParse
	if err == nil {
		reason, step = ReasonValidateFailed, stepValidate
		err = c.cfg.Validate(cfg)
	}
	if err != nil {
		msg := fmt.Sprintf("failed to %s assigned configuration %q from %s: %v; still using %s", step, id, src.Origin, err, describe(c.status.ID))
		st := c.status
		st.Condition = condition(ConditionFalse, reason, msg)
		c.setStatus(st)
		return c.status, fmt.Errorf("assign %q: %w: %w", id, ErrInvalidConfig, err)
	}
	now := c.clock.Now()
	if c.st.LastKnownGood != "" && hash == c.st.LastKnownGoodHash {
		next := c.st.clone()
		next.Assigned, next.AssignedHash, next.AssignedAt = next.LastKnownGood, hash, now
		next.Active, next.Error, next.TriesLeft = next.LastKnownGood, nil, 0
		if err := c.cfg.Store.SetState(ctx, next); err != nil {
			return c.status, fmt.Errorf("assign %q: %w", id, err)
		}
		c.st, c.activeHash, c.dirty = next, hash, false
		c.trial++
		st := Status[T]{Config: cfg, ID: next.LastKnownGood, Assigned: next.LastKnownGood, Phase: PhaseLastKnownGood,
			Condition: condition(ConditionTrue, ReasonLastKnownGood,
				fmt.Sprintf("assigned configuration %q from %s is last-known-good checkpoint %q", id, src.Origin, next.LastKnownGood))}
		log.Info("configuration assigned", "id", next.LastKnownGood, "origin", src.Origin, "phase", st.Phase)
		c.setStatus(st)
		return c.status, nil
	}
	err = c.cfg.Store.Save(ctx, Checkpoint{ID: id, Payload: payload, Source: src, Created: now})
	if errors.Is(err, ErrConflict) && id != HashID(payload) {
		// The source named other content with this ID before (an origin
		// that does not bump its version, such as client-go's fake
		// clientset): the payload is named by its hash instead, so that
		// the update is not lost.
		log.Info("checkpoint ID already names other content; naming the payload by its hash", "id", id, "origin", src.Origin)
		id = HashID(payload)
		err = c.cfg.Store.Save(ctx, Checkpoint{ID: id, Payload: payload, Source: src, Created: now})
	}
	if err != nil {
		return c.status, fmt.Errorf("assign %q: %w", id, err)
	}
	next := c.st.clone()
	next.Assigned, next.AssignedHash, next.AssignedAt = id, hash, now
	next.Active, next.Error, next.TriesLeft = id, nil, c.cfg.MaxTrialStarts-1
	if err := c.cfg.Store.SetState(ctx, next); err != nil {
		return c.status, fmt.Errorf("assign %q: %w", id, err)
	}
	c.st, c.activeHash, c.dirty = next, hash, false
	c.trial++
	c.trialStart = now
	st := Status[T]{Config: cfg, ID: id, Assigned: id, Phase: PhaseTrial, TrialStart: now, TriesLeft: next.TriesLeft}
	st.Condition = condition(ConditionTrue, ReasonTrial, c.trialMessage(id))
	log.Info("configuration assigned", "id", id, "origin", src.Origin, "phase", st.Phase)
	c.setStatus(st)
	c.trialStarted()
	return c.status, nil
}

// okCondition is the True condition of a status in PhaseTrial or
// PhaseLastKnownGood.
func (c *Controller[T]) okCondition(st Status[T]) Condition {
	if st.Phase == PhaseTrial {
		return condition(ConditionTrue, ReasonTrial, c.trialMessage(st.ID))
	}
	if st.Phase == PhaseLocal {
		return condition(ConditionTrue, ReasonLocal, "no configuration assigned; using the local configuration")
	}
	return condition(ConditionTrue, ReasonLastKnownGood, fmt.Sprintf("using assigned checkpoint %q, which is last-known-good", st.ID))
}

func describe(id string) string {
	if id == "" {
		return "the local configuration"
	}
	return fmt.Sprintf("checkpoint %q", id)
}

// Confirm ends the running trial now, making the assigned configuration
// last-known-good, as an operator confirms a configuration in try mode. It
// fails with ErrNoTrial when nothing is on trial.
func (c *Controller[T]) Confirm(ctx context.Context) (Status[T], error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.status.Phase != PhaseTrial {
		return c.status, ErrNoTrial
	}
	if err := c.graduate(ctx, logr.FromContextOrDiscard(ctx), "was confirmed"); err != nil {
		return c.status, err
	}
	return c.status, nil
}

// Rollback ends the running trial now as a failure: the payload is
// rejected (persistently, by hash) and last-known-good, or the local
// configuration, runs. why is recorded in the condition. It fails with
// ErrNoTrial when nothing is on trial.
func (c *Controller[T]) Rollback(ctx context.Context, why string) (Status[T], error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.status.Phase != PhaseTrial {
		return c.status, ErrNoTrial
	}
	msg := fmt.Sprintf("trial of checkpoint %q rolled back by request: %s", c.status.ID, why)
	if err := c.rollback(ctx, logr.FromContextOrDiscard(ctx), ReasonManualRollback, msg); err != nil {
		return c.status, err
	}
	return c.status, nil
}

// Run checks trials every CheckInterval (on backoff.Every), watches Source
// if set, and delivers statuses to OnStatus. It blocks until ctx ends and every
// goroutine it started has returned, then returns nil, as
// controller-runtime's manager does. It returns an error only for a real
// failure: Bootstrap was not called ([ErrNotBootstrapped]), Run is already
// running ([ErrRunning]), or the Source failed in a way it cannot retry
// (Run then stops its other goroutines and returns the wrapped error).
func (c *Controller[T]) Run(ctx context.Context) error {
	c.mu.Lock()
	switch {
	case !c.bootstrapped:
		c.mu.Unlock()
		return ErrNotBootstrapped
	case c.running:
		c.mu.Unlock()
		return ErrRunning
	}
	c.running = true
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.running = false
		c.mu.Unlock()
	}()

	g, ctx := errgroup.WithContext(ctx)
	if c.cfg.OnStatus != nil {
		w := c.statuses.Watch()
		g.Go(func() error {
			defer w.Close()
			for {
				st, err := w.Get(ctx)
				if err != nil {
					return nil // ctx ended
				}
				c.cfg.OnStatus(st)
			}
		})
	}
	if c.cfg.Source != nil {
		g.Go(func() error {
			if err := c.cfg.Source.Watch(ctx, c.deliver); err != nil && ctx.Err() == nil {
				return fmt.Errorf("checkpoint: run: source: %w", err)
			}
			return nil
		})
	}
	g.Go(func() error {
		err := backoff.Every(ctx, c.cfg.CheckInterval, 0, c.check,
			backoff.WithClock(c.clock), backoff.WithName("checkpoint trial"))
		if err != nil && ctx.Err() == nil {
			return fmt.Errorf("checkpoint: run: trial checks: %w", err)
		}
		return nil
	})
	return g.Wait()
}

// check is one trial check: probe, then graduate or roll back. It also
// retries writing a state record that failed before.
func (c *Controller[T]) check(ctx context.Context) error {
	log := logr.FromContextOrDiscard(ctx)
	c.mu.Lock()
	if c.dirty {
		c.persist(ctx, log, "record the configuration state")
	}
	st, trial := c.status, c.trial
	c.mu.Unlock()
	if st.Phase != PhaseTrial {
		return nil
	}
	var probeErr error
	if c.cfg.Probe != nil {
		probeErr = c.cfg.Probe(ctx, st.Config)
	}
	if ctx.Err() != nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.trial != trial {
		return nil // assigned, confirmed or rolled back meanwhile
	}
	if probeErr != nil {
		why := fmt.Sprintf("health probe failed during the trial of checkpoint %q: %v", st.ID, probeErr)
		return c.rollback(ctx, log, ReasonProbeFailed, why)
	}
	if c.clock.Since(c.trialStart) < c.cfg.TrialDuration {
		return nil
	}
	return c.graduate(ctx, log, fmt.Sprintf("passed its %v trial", c.cfg.TrialDuration))
}

// graduate makes the configuration on trial last-known-good; c.mu is held.
// If the record cannot be written the trial goes on and the next check
// tries again.
func (c *Controller[T]) graduate(ctx context.Context, log logr.Logger, how string) error {
	st := c.status
	next := c.st.clone()
	next.LastKnownGood, next.LastKnownGoodHash = next.Assigned, next.AssignedHash
	next.Active, next.Error, next.TriesLeft = next.Assigned, nil, 0
	if err := c.cfg.Store.SetState(ctx, next); err != nil {
		return fmt.Errorf("graduate %q: %w", st.ID, err)
	}
	c.st, c.dirty = next, false
	c.trial++
	st.Phase, st.TrialStart, st.TriesLeft = PhaseLastKnownGood, time.Time{}, 0
	st.Condition = condition(ConditionTrue, ReasonLastKnownGood, fmt.Sprintf("checkpoint %q %s and is last-known-good", st.ID, how))
	log.Info("configuration passed its trial", "id", st.ID, "how", how)
	c.setStatus(st)
	c.confirmed(c.clock.Since(c.trialStart))
	return nil
}

// rollback ends the trial as a failure; c.mu is held. The payload's hash
// is rejected and the assigned checkpoint stays assigned with the failure
// as its error, so a restart does not try it again; if the record cannot
// be written, the rollback stands in this process and the write is retried
// at every check.
func (c *Controller[T]) rollback(ctx context.Context, log logr.Logger, reason, why string) error {
	cur := c.st.Assigned
	c.st = c.st.Reject(Failure{Hash: c.st.AssignedHash, ID: cur, Reason: reason, Message: why, At: c.clock.Now()})
	next, err := c.fallback(ctx, cur, reason, why)
	if err != nil {
		return err
	}
	c.st.Active, c.st.TriesLeft = next.ID, 0
	c.trial++
	c.persist(ctx, log, "record the rollback")
	log.Error(errors.New(why), "configuration failed its trial; rolled back", "id", cur, "to", next.ID)
	c.setStatus(next)
	c.rolledBack(cur, reason, c.clock.Since(c.trialStart))
	return nil
}

// deliver assigns what the source delivers. Refusals and invalid payloads
// are reported in the condition and not retried; other failures (the
// store) are retried with backoff until they succeed, a newer delivery is
// due or ctx ends, so a delivered assignment is not lost to a passing
// store error.
func (c *Controller[T]) deliver(ctx context.Context, payload []byte, src Source) {
	err := backoff.Retry(ctx, func(ctx context.Context) error {
		_, err := c.Assign(ctx, payload, src)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, ErrRejected), errors.Is(err, ErrInvalidConfig), errors.Is(err, ErrInvalidID), errors.Is(err, ErrConflict):
			return backoff.Permanent(err)
		}
		return err
	}, backoff.WithClock(c.clock), backoff.WithName("checkpoint assign"))
	if err != nil && !errors.Is(err, ErrRejected) && ctx.Err() == nil {
		logr.FromContextOrDiscard(ctx).Error(err, "assigning delivered configuration", "origin", src.Origin)
	}
}

// setStatus publishes st; c.mu must be held. It reports the condition
// to Conditions when its status, reason or message changed, and the phase
// to Metrics when it changed (both also for the first status).
func (c *Controller[T]) setStatus(st Status[T]) {
	old := c.status.Condition
	first := old.Type != ConditionConfigOK
	st.Condition.LastTransitionTime = c.clock.Now()
	if !first && old.Status == st.Condition.Status {
		st.Condition.LastTransitionTime = old.LastTransitionTime
	}
	phaseChanged := first || c.status.Phase != st.Phase
	c.status = st
	c.statuses.Set(st)
	cond := st.Condition
	if c.cfg.Conditions != nil && (first || old.Status != cond.Status || old.Reason != cond.Reason || old.Message != cond.Message) {
		c.cfg.Conditions.ReportCondition(cond.Type, string(cond.Status), cond.Reason, cond.Message)
	}
	if phaseChanged {
		c.observe(Observation{Event: EventPhase, ID: st.ID})
	}
}

// observe reports o with the current phase; c.mu must be held.
func (c *Controller[T]) observe(o Observation) {
	if c.cfg.Metrics == nil {
		return
	}
	o.Phase = c.status.Phase
	c.cfg.Metrics.Observe(o)
}

// event records a Kubernetes-style event; c.mu must be held.
func (c *Controller[T]) event(eventtype, reason, message string) {
	if c.cfg.Events != nil {
		c.cfg.Events.Event(eventtype, reason, message)
	}
}

// trialStarted reports that the trial of the assigned checkpoint started,
// after the status saying so was set; c.mu must be held.
func (c *Controller[T]) trialStarted() {
	id := c.status.ID
	c.observe(Observation{Event: EventTrialStarted, ID: id, TriesLeft: c.st.TriesLeft})
	c.event(eventTypeNormal, EventReasonTrialStarted, c.status.Condition.Message)
}

// confirmed reports that the configuration on trial became last-known-good
// after trialTime; c.mu must be held.
func (c *Controller[T]) confirmed(trialTime time.Duration) {
	c.observe(Observation{Event: EventConfirmed, ID: c.status.ID, TrialTime: trialTime})
	c.event(eventTypeNormal, EventReasonConfirmed, c.status.Condition.Message)
}

// rolledBack reports that assigned checkpoint id was rolled back for
// reason after trialTime, after the status saying so was set; c.mu must
// be held.
func (c *Controller[T]) rolledBack(id, reason string, trialTime time.Duration) {
	c.observe(Observation{Event: EventRolledBack, ID: id, Reason: reason, TrialTime: trialTime})
	c.event(eventTypeWarning, EventReasonRolledBack, reason+": "+c.status.Condition.Message)
}

func condition(status ConditionStatus, reason, msg string) Condition {
	return Condition{Type: ConditionConfigOK, Status: status, Reason: reason, Message: msg}
}
