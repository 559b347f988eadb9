package checkpoint

import "time"

// Event names what an [Observation] reports.
type Event string

// Events reported to a [Metrics] hook.
const (
	// EventPhase: the controller's phase changed to Phase (also reported
	// once at start).
	EventPhase Event = "phase"
	// EventTrialStarted: a trial of ID began; TriesLeft is how many more
	// starts of this trial remain.
	EventTrialStarted Event = "trial_started"
	// EventConfirmed: ID passed its trial after TrialTime.
	EventConfirmed Event = "confirmed"
	// EventRolledBack: ID was rolled back for Reason after TrialTime
	// (0 when it failed before its trial began).
	EventRolledBack Event = "rolled_back"
)

// Observation is one thing a [Controller] reports to its [Metrics] hook.
type Observation struct {
	Event Event
	// Phase is the controller's phase after the observation.
	Phase Phase
	// ID is the checkpoint concerned ("" for the local configuration).
	ID string
	// Reason is why a rollback happened: one of the failure reasons of
	// the ConfigOK condition (ReasonParseFailed, ReasonCrashLoop, ...).
	Reason string
	// TrialTime is how long the trial ran, for EventConfirmed and
	// EventRolledBack.
	TrialTime time.Duration
	// TriesLeft is how many more starts the trial gets, for
	// EventTrialStarted.
	TriesLeft int
}

// Metrics receives a controller's observations: its phase, rollbacks by
// reason, trial time and the boot tries left.
// github.com/reconkit/reconkit/prommetrics turns them into
// collectors.
//
// Threading contract: Observe is called in order, from the goroutine
// calling Bootstrap, Assign, Confirm or Rollback or running Run's trial
// checks and source, with the controller's lock held; it must not block
// and must not call back into the controller.
type Metrics interface {
	Observe(Observation)
}

// MetricsFunc adapts a function to [Metrics].
type MetricsFunc func(Observation)

// Observe calls f.
func (f MetricsFunc) Observe(o Observation) { f(o) }

var _ Metrics = MetricsFunc(nil)

// EventRecorder receives Kubernetes-style events: eventtype is "Normal" or
// "Warning", reason a CamelCase word, message a sentence. Every reconkit
// package accepts the same method set.
//
// Threading contract: as for [Metrics].
type EventRecorder interface {
	Event(eventtype, reason, message string)
}

// Reasons of the events a [Controller] records through its EventRecorder.
const (
	// EventReasonTrialStarted (Normal): a trial started; the message is
	// the ConfigOK condition's.
	EventReasonTrialStarted = "ConfigTrialStarted"
	// EventReasonConfirmed (Normal): a configuration passed its trial or
	// was confirmed and is last-known-good.
	EventReasonConfirmed = "ConfigConfirmed"
	// EventReasonRolledBack (Warning): an assigned configuration was
	// rolled back; the message is the ConfigOK reason, a colon and the
	// condition's message.
	EventReasonRolledBack = "ConfigRolledBack"
)

const (
	eventTypeNormal  = "Normal"
	eventTypeWarning = "Warning"
)
