package checkpoint

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/reconkit/reconkit/internal/event"
	"github.com/reconkit/reconkit/internal/jitter"
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
	ReasonSaveFailed       = "AssignedSaveFailed"     // the assigned checkpoint could not be stored
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
	// Assign, and a refusal or failure is reported in the condition. A
	// delivery that fails on the store (a full disk) is retried with
	// backoff on a goroutine of Run's own until it succeeds, until
	// anything newer is assigned (a newer delivery, or the host's Assign),
	// or until Run's context ends; the source is never held up behind it,
	// and a newer delivery is tried at once.
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
	// Rand draws the jitter of the retries of a failed assignment and of
	// the trial checks' failure backoff, uniformly in [0, 1); nil means
	// math/rand/v2's Float64, whose global source cannot be seeded. New
	// calls it to split one source per loop; it is not called after New
	// returns.
	Rand func() float64
}

// Controller runs assigned configuration with a trial and rolls back to the
// last-known-good configuration when it fails. Bootstrap it once at
// start-up, then Run it; Assign, Confirm, Rollback and Status may be called
// from any goroutine.
type Controller[T any] struct {
	cfg   Config[T]
	clock clock.Clock
	// rand holds each loop's jitter source, split from cfg.Rand in New.
	rand struct{ assign, check func() float64 }

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
	assignSeq    uint64    // increments at every Assign and delivery; a retried delivery stops when it is not the newest
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
	c := &Controller[T]{cfg: cfg, clock: clk}
	c.rand.assign, c.rand.check = jitter.Split(cfg.Rand), jitter.Split(cfg.Rand)
	return c, nil
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
