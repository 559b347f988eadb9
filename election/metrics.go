package election

import "time"

// Event names what an [Observation] reports.
type Event string

// Events reported to a [Metrics] hook.
const (
	// EventAcquired: a term began. Latency is the wait from the start of
	// the Campaign call to the acquisition; Handover is the time from the
	// end of the previous holder's term, as this candidate observed it
	// (the deletion of its key, or its Lease's expiry), to the
	// acquisition, or 0 when there was no previous holder to observe.
	EventAcquired Event = "acquired"
	// EventRenewed: the term was renewed. Latency is the renewal's round
	// trip; Slack is how long the term was still valid, by its holder's
	// own deadline, when the renewal was sent.
	EventRenewed Event = "renewed"
	// EventRenewFailed: a renewal attempt failed; Err says why. Latency
	// and Slack as for EventRenewed.
	EventRenewFailed Event = "renew_failed"
	// EventLost: the term ended without Resign (expiry, deletion,
	// partition, another holder); Err says why.
	EventLost Event = "lost"
	// EventResigned: the term ended through Resign or Close.
	EventResigned Event = "resigned"
)

// Observation is one thing an elector reports to its [Metrics] hook.
type Observation struct {
	Event Event
	// Backend is "etcd" or "lease".
	Backend string
	// Election names the election: the etcd key prefix, or the Lease's
	// namespace/name.
	Election string
	// Identity is this candidate's identity.
	Identity string
	// Token is the term's fencing token (0 before a term began).
	Token Token
	// Latency, Handover and Slack: see each Event.
	Latency  time.Duration
	Handover time.Duration
	Slack    time.Duration
	// Err is the failure, for EventRenewFailed and EventLost.
	Err error
}

// Metrics receives an elector's observations: from them a host derives
// whether this candidate leads (0/1), the number of transitions, acquire
// and handover latency, renewal failures and the slack left at each
// renewal. github.com/reconkit/reconkit/prommetrics turns them into
// collectors.
//
// Threading contract: Observe is called from the elector's own goroutines,
// possibly concurrently, never while a lock the host could contend is held;
// it must not block and must not call back into the elector.
type Metrics interface {
	Observe(Observation)
}

// MetricsFunc adapts a function to [Metrics].
type MetricsFunc func(Observation)

// Observe calls f.
func (f MetricsFunc) Observe(o Observation) { f(o) }

var _ Metrics = MetricsFunc(nil)

// EventRecorder receives Kubernetes-style events: eventtype is "Normal" or
// "Warning", reason a CamelCase word, message a sentence. The same method
// set is accepted by every reconkit package, so one value, for example
// github.com/reconkit/reconkit/events.ForObject over client-go's
// record.EventRecorder, serves them all.
//
// Threading contract: as for [Metrics].
type EventRecorder interface {
	Event(eventtype, reason, message string)
}

// Reasons of the events electors record through Config.Events.
const (
	// ReasonLeaderElected (Normal): this candidate began a term.
	ReasonLeaderElected = "LeaderElected"
	// ReasonLeadershipLost (Warning): a term ended without Resign.
	ReasonLeadershipLost = "LeadershipLost"
	// ReasonResigned (Normal): a term ended through Resign or Close.
	ReasonResigned = "Resigned"
)
