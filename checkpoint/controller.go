package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	// ErrRejected marks an assignment of a checkpoint this controller has
	// already rolled back from.
	ErrRejected = errors.New("checkpoint: checkpoint was rolled back and is rejected")
	// ErrNotBootstrapped marks a call that needs Bootstrap first.
	ErrNotBootstrapped = errors.New("checkpoint: controller not bootstrapped")
	// ErrRunning marks a second concurrent call to Run.
	ErrRunning = errors.New("checkpoint: controller already running")
)

// ConditionConfigOK is the type of the node condition the Controller
// reports.
const ConditionConfigOK corev1.NodeConditionType = "ConfigOK"

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
)

// Defaults of Config.
const (
	DefaultTrialDuration  = 10 * time.Minute
	DefaultCheckInterval  = 10 * time.Second
	DefaultSourceInterval = 30 * time.Second
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
	// TrialStart is when the trial of Assigned began, in PhaseTrial.
	TrialStart time.Time
	// Condition is the ConfigOK node condition to publish.
	Condition corev1.NodeCondition
}

// ConfigSource delivers assigned configuration. Fetch returns the payload
// and where it came from; an error wrapping [ErrNotFound] means nothing is
// assigned. [ConfigMapSource] is one implementation.
type ConfigSource interface {
	Fetch(ctx context.Context) ([]byte, Source, error)
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
	// TrialDuration is how long an assigned configuration runs before it
	// may become last-known-good. 0 means DefaultTrialDuration; negative
	// is rejected.
	TrialDuration time.Duration
	// CheckInterval is how often Run checks a trial. 0 means
	// DefaultCheckInterval.
	CheckInterval time.Duration
	// Probe, if set, checks the host's health while a configuration is on
	// trial. Run calls it at every check during a trial, from Run's
	// goroutine, never concurrently with itself; a configuration graduates
	// only if every call since the trial (or this process) began returned
	// nil, and the first error rolls back to last-known-good. It must
	// return when ctx ends.
	Probe func(ctx context.Context, cfg T) error
	// OnStatus, if set, is told about every change of Status. Run calls it
	// from one goroutine of its own, never concurrently with itself and
	// never from the trial loop, which does not wait for it: if OnStatus is
	// slow, intermediate statuses are skipped and it receives the newest.
	// Changes made before Run starts are delivered when it starts (the
	// newest one). It must return when Run's context ends.
	OnStatus func(Status[T])
	// Source, if set, is polled by Run every SourceInterval; a new payload
	// is passed to Assign.
	Source ConfigSource
	// SourceInterval is how often Run polls Source. 0 means
	// DefaultSourceInterval.
	SourceInterval time.Duration
	// Clock is the time source; nil means the real clock.
	Clock clock.Clock
}

// Controller runs assigned configuration with a trial and rolls back to the
// last-known-good configuration when it fails. Bootstrap it once at
// start-up, then Run it; Assign and Status may be called from any
// goroutine.
type Controller[T any] struct {
	cfg   Config[T]
	clock clock.Clock

	mu           sync.Mutex
	bootstrapped bool
	running      bool
	status       Status[T]
	lkg          string            // last-known-good checkpoint ID
	assignedHash string            // hash of the assigned checkpoint's payload
	trial        uint64            // increments whenever the trial changes
	rejected     map[string]string // rolled-back ID -> why
	statuses     event.Value[Status[T]]
}

// New returns a Controller for cfg, filling defaults and rejecting bad
// values.
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
	}
	for name, d := range map[string]*time.Duration{
		"TrialDuration":  &cfg.TrialDuration,
		"CheckInterval":  &cfg.CheckInterval,
		"SourceInterval": &cfg.SourceInterval,
	} {
		if *d < 0 {
			errs = append(errs, fmt.Errorf("%s is %v, must not be negative", name, *d))
		}
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
	if cfg.SourceInterval == 0 {
		cfg.SourceInterval = DefaultSourceInterval
	}
	clk := cfg.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &Controller[T]{cfg: cfg, clock: clk, rejected: map[string]string{}}, nil
}

// Status returns the newest status. Before Bootstrap it is the zero Status.
func (c *Controller[T]) Status() Status[T] {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.status
}

// Bootstrap decides which configuration to run, in the order of the
// kubelet's dynamic configuration: validate the local configuration (an
// error if invalid), open the store, then load, parse and validate the
// assigned checkpoint; if any step fails, do the same for the
// last-known-good checkpoint, and if that fails too, or nothing is
// assigned, use the local configuration. Failures never stop the host: they
// are reported in the ConfigOK condition with a reason naming the failing
// step and a message naming the checkpoint. Bootstrap changes nothing in
// the store besides initializing it. If the assigned checkpoint is on
// trial, the trial resumes from the start recorded in the store.
//
// The only errors are ErrInvalidLocal and the end of ctx.
func (c *Controller[T]) Bootstrap(ctx context.Context) (Status[T], error) {
	log := logr.FromContextOrDiscard(ctx)
	if err := c.cfg.Validate(c.cfg.Local); err != nil {
		return Status[T]{}, fmt.Errorf("%w: %w", ErrInvalidLocal, err)
	}
	st, err := c.decide(ctx)
	if err != nil {
		return Status[T]{}, err
	}
	if st.Condition.Status == corev1.ConditionFalse {
		log.Error(nil, "assigned configuration not used", "reason", st.Condition.Reason, "message", st.Condition.Message)
	} else {
		log.Info("configuration chosen", "id", st.ID, "phase", st.Phase)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.bootstrapped = true
	c.trial++
	c.setStatus(st)
	return c.status, nil
}

// decide does the work of Bootstrap and records lkg and assignedHash.
func (c *Controller[T]) decide(ctx context.Context) (Status[T], error) {
	s := c.cfg.Store
	local := func(reason, msg string, ok corev1.ConditionStatus, assigned string) Status[T] {
		phase := PhaseLocal
		if ok == corev1.ConditionFalse {
			phase = PhaseRolledBack
		}
		return Status[T]{Config: c.cfg.Local, Phase: phase, Assigned: assigned, Condition: condition(ok, reason, msg)}
	}
	if err := s.Initialize(ctx); err != nil {
		if ctx.Err() != nil {
			return Status[T]{}, ctx.Err()
		}
		return local(ReasonStoreUnavailable, fmt.Sprintf("failed to open the checkpoint store: %v; using the local configuration", err), corev1.ConditionFalse, ""), nil
	}
	cur, err := s.Current(ctx)
	var lkg string
	if err == nil {
		lkg, err = s.LastKnownGood(ctx)
	}
	if err != nil {
		if ctx.Err() != nil {
			return Status[T]{}, ctx.Err()
		}
		return local(ReasonStoreUnavailable, fmt.Sprintf("failed to read which checkpoint is assigned: %v; using the local configuration", err), corev1.ConditionFalse, ""), nil
	}
	c.lkg = lkg
	if cur == "" {
		return local(ReasonLocal, "no configuration assigned; using the local configuration", corev1.ConditionTrue, ""), nil
	}
	cfg, hash, step, err := c.load(ctx, cur)
	if err == nil {
		c.assignedHash = hash
		st := Status[T]{Config: cfg, ID: cur, Assigned: cur}
		if cur == lkg {
			st.Phase = PhaseLastKnownGood
			st.Condition = condition(corev1.ConditionTrue, ReasonLastKnownGood, fmt.Sprintf("using assigned checkpoint %q, which is last-known-good", cur))
			return st, nil
		}
		start, err := s.CurrentSetAt(ctx)
		if err != nil || start.IsZero() {
			start = c.clock.Now()
		}
		st.Phase, st.TrialStart = PhaseTrial, start
		st.Condition = condition(corev1.ConditionTrue, ReasonTrial, fmt.Sprintf("using assigned checkpoint %q on trial since %s", cur, start.UTC().Format(time.RFC3339)))
		return st, nil
	}
	if ctx.Err() != nil {
		return Status[T]{}, ctx.Err()
	}
	reason := stepReason(step)
	why := fmt.Sprintf("failed to %s assigned checkpoint %q: %v", step, cur, err)
	st, err := c.fallback(ctx, cur, reason, why)
	if err != nil {
		return Status[T]{}, err
	}
	return st, nil
}

// fallback returns the status after assigned checkpoint cur failed: the
// last-known-good configuration, or the local one if that fails too or is
// cur itself.
func (c *Controller[T]) fallback(ctx context.Context, cur, reason, why string) (Status[T], error) {
	lkg := c.lkg
	if lkg == "" || lkg == cur {
		return Status[T]{Config: c.cfg.Local, Phase: PhaseRolledBack, Assigned: cur,
			Condition: condition(corev1.ConditionFalse, reason, why+"; using the local configuration")}, nil
	}
	cfg, _, step, err := c.load(ctx, lkg)
	if err != nil {
		if ctx.Err() != nil {
			return Status[T]{}, ctx.Err()
		}
		return Status[T]{Config: c.cfg.Local, Phase: PhaseRolledBack, Assigned: cur,
			Condition: condition(corev1.ConditionFalse, ReasonLKGFailed,
				fmt.Sprintf("%s; then failed to %s last-known-good checkpoint %q: %v; using the local configuration", why, step, lkg, err))}, nil
	}
	return Status[T]{Config: cfg, ID: lkg, Phase: PhaseRolledBack, Assigned: cur,
		Condition: condition(corev1.ConditionFalse, reason, fmt.Sprintf("%s; using last-known-good checkpoint %q", why, lkg))}, nil
}

// load loads, parses and validates checkpoint id, naming the step that
// failed.
func (c *Controller[T]) load(ctx context.Context, id string) (cfg T, hash, step string, err error) {
	cp, err := c.cfg.Store.Load(ctx, id)
	if err != nil {
		return cfg, "", stepLoad, err
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
// checkpoint src.ID(), makes that current and starts its trial, recording
// the trial start in the store. The returned Status holds the parsed
// configuration; the host applies it (or restarts, after which Bootstrap
// resumes the trial).
//
// Assigning the running checkpoint, or a payload identical to it, changes
// nothing. Assigning the last-known-good checkpoint needs no trial. A
// checkpoint this controller rolled back from is refused with ErrRejected.
func (c *Controller[T]) Assign(ctx context.Context, payload []byte, src Source) (Status[T], error) {
	id, err := src.ID()
	if err != nil {
		return Status[T]{}, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.bootstrapped {
		return Status[T]{}, ErrNotBootstrapped
	}
	if id == c.status.ID && c.status.Phase != PhaseRolledBack {
		return c.status, nil
	}
	if c.status.Phase != PhaseRolledBack && c.status.ID != "" && HashPayload(payload) == c.assignedHash {
		return c.status, nil
	}
	if why, bad := c.rejected[id]; bad {
		return c.status, fmt.Errorf("assign %q: %w: %s", id, ErrRejected, why)
	}
	cfg, err := c.cfg.Parse(payload)
	reason := ReasonParseFailed
	if err == nil {
		reason = ReasonValidateFailed
		err = c.cfg.Validate(cfg)
	}
	if err != nil {
		step := map[string]string{ReasonParseFailed: stepParse, ReasonValidateFailed: stepValidate}[reason]
		msg := fmt.Sprintf("failed to %s assigned configuration %q from %s: %v; still using %s", step, id, src.Origin, err, describe(c.status.ID))
		c.rejected[id] = msg
		st := c.status
		st.Condition = condition(corev1.ConditionFalse, reason, msg)
		c.setStatus(st)
		return c.status, fmt.Errorf("assign %q: %w: %w", id, ErrInvalidConfig, err)
	}
	now := c.clock.Now()
	if err := c.cfg.Store.Save(ctx, Checkpoint{ID: id, Payload: payload, Source: src, Created: now}); err != nil {
		return c.status, fmt.Errorf("assign %q: %w", id, err)
	}
	if err := c.cfg.Store.SetCurrent(ctx, id, now); err != nil {
		return c.status, fmt.Errorf("assign %q: %w", id, err)
	}
	c.assignedHash = HashPayload(payload)
	c.trial++
	st := Status[T]{Config: cfg, ID: id, Assigned: id}
	if id == c.lkg {
		st.Phase = PhaseLastKnownGood
		st.Condition = condition(corev1.ConditionTrue, ReasonLastKnownGood, fmt.Sprintf("using assigned checkpoint %q, which is last-known-good", id))
	} else {
		st.Phase, st.TrialStart = PhaseTrial, now
		st.Condition = condition(corev1.ConditionTrue, ReasonTrial, fmt.Sprintf("using assigned checkpoint %q on trial since %s", id, now.UTC().Format(time.RFC3339)))
	}
	logr.FromContextOrDiscard(ctx).Info("configuration assigned", "id", id, "origin", src.Origin, "phase", st.Phase)
	c.setStatus(st)
	return c.status, nil
}

func describe(id string) string {
	if id == "" {
		return "the local configuration"
	}
	return fmt.Sprintf("checkpoint %q", id)
}

// Run checks trials every CheckInterval (on backoff.Every), polls Source if
// set, and delivers statuses to OnStatus. It blocks until ctx ends and every
// goroutine it started has returned, then returns ctx.Err(). Bootstrap must
// have been called.
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

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	if c.cfg.OnStatus != nil {
		w := c.statuses.Watch()
		wg.Go(func() {
			defer w.Close()
			for {
				st, err := w.Get(ctx)
				if err != nil {
					return
				}
				c.cfg.OnStatus(st)
			}
		})
	}
	if c.cfg.Source != nil {
		wg.Go(func() {
			errs <- backoff.Every(ctx, c.cfg.SourceInterval, 0.1, c.sync,
				backoff.WithClock(c.clock), backoff.WithName("checkpoint source"))
		})
	}
	wg.Go(func() {
		errs <- backoff.Every(ctx, c.cfg.CheckInterval, 0, c.check,
			backoff.WithClock(c.clock), backoff.WithName("checkpoint trial"))
	})
	<-ctx.Done()
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("checkpoint: run: %w", err)
		}
	}
	return ctx.Err()
}

// check is one trial check: probe, then graduate or roll back.
func (c *Controller[T]) check(ctx context.Context) error {
	c.mu.Lock()
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
		return nil // assigned or rolled back meanwhile
	}
	log := logr.FromContextOrDiscard(ctx)
	if probeErr != nil {
		return c.rollback(ctx, log, st, probeErr)
	}
	elapsed := c.clock.Since(st.TrialStart)
	if elapsed < c.cfg.TrialDuration {
		return nil
	}
	if err := c.cfg.Store.SetLastKnownGood(ctx, st.ID); err != nil {
		return fmt.Errorf("graduate %q: %w", st.ID, err)
	}
	c.lkg = st.ID
	c.trial++
	st.Phase, st.TrialStart = PhaseLastKnownGood, time.Time{}
	st.Condition = condition(corev1.ConditionTrue, ReasonLastKnownGood, fmt.Sprintf("checkpoint %q passed its %v trial and is last-known-good", st.ID, c.cfg.TrialDuration))
	log.Info("configuration passed its trial", "id", st.ID)
	c.setStatus(st)
	return nil
}

// rollback leaves a trial whose probe failed. It records the
// last-known-good checkpoint as current so a restart does not retry the
// failed one, and remembers the failed ID to refuse it later.
func (c *Controller[T]) rollback(ctx context.Context, log logr.Logger, st Status[T], probeErr error) error {
	why := fmt.Sprintf("health probe failed during the trial of checkpoint %q: %v", st.ID, probeErr)
	c.rejected[st.ID] = why
	next, err := c.fallback(ctx, st.ID, ReasonProbeFailed, why)
	if err != nil {
		return err
	}
	c.trial++
	if err := c.cfg.Store.SetCurrent(ctx, next.ID, c.clock.Now()); err != nil {
		// The rollback stands for this process; a restart will see the
		// failed checkpoint as current and try it on trial again.
		next.Condition.Message += fmt.Sprintf(" (recording the rollback failed: %v)", err)
		log.Error(err, "recording rollback", "from", st.ID, "to", next.ID)
	}
	c.assignedHash = ""
	log.Error(probeErr, "configuration failed its trial; rolled back", "id", st.ID, "to", next.ID)
	c.setStatus(next)
	return nil
}

// sync polls Source and assigns what it delivers.
func (c *Controller[T]) sync(ctx context.Context) error {
	payload, src, err := c.cfg.Source.Fetch(ctx)
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("fetch configuration: %w", err)
	}
	_, err = c.Assign(ctx, payload, src)
	if errors.Is(err, ErrRejected) {
		return nil // already reported in the condition
	}
	return err
}

// setStatus publishes st; c.mu must be held.
func (c *Controller[T]) setStatus(st Status[T]) {
	now := metav1.NewTime(c.clock.Now())
	st.Condition.LastHeartbeatTime = now
	st.Condition.LastTransitionTime = now
	if old := c.status.Condition; old.Type == ConditionConfigOK && old.Status == st.Condition.Status {
		st.Condition.LastTransitionTime = old.LastTransitionTime
	}
	c.status = st
	c.statuses.Set(st)
}

func condition(status corev1.ConditionStatus, reason, msg string) corev1.NodeCondition {
	return corev1.NodeCondition{Type: ConditionConfigOK, Status: status, Reason: reason, Message: msg}
}
