package versiongate

import "time"

// Event names what an [Observation] reports.
type Event string

// Events reported to a [Metrics] hook.
const (
	// EventPhase: the gate's phase changed to Phase.
	EventPhase Event = "phase"
	// EventBlocking: the number of nodes that keep the gate from finishing
	// changed to Blocking.
	EventBlocking Event = "blocking"
	// EventRestrict: the leader wrote the restricted status (Token is its
	// term's token).
	EventRestrict Event = "restrict"
	// EventDone: the leader wrote the done status after its initial
	// reconcile. It is observed, and the UpgradeDone event recorded,
	// before the phase becomes PhaseDone: a host that sees PhaseDone has
	// been told already.
	EventDone Event = "done"
	// EventKeepAlive: the server acknowledged a keep-alive of this node's
	// record. Latency is the keep-alive's round trip; ValidFor is how long
	// the record stays valid by the node's local deadline.
	EventKeepAlive Event = "keepalive"
	// EventRecordLost: the node's record was lost (or its local validity
	// deadline passed); Err says why.
	EventRecordLost Event = "record_lost"
)

// Observation is one thing a [Gate] reports to its [Metrics] hook.
type Observation struct {
	Event Event
	// NodeID is this node's ID.
	NodeID string
	// Phase is the gate's phase when the observation was made (for
	// EventPhase, the phase it entered; for EventDone, still the phase
	// before PhaseDone).
	Phase Phase
	// Blocking is the number of blocking nodes, for EventBlocking.
	Blocking int
	// Token is the leader's fencing token, for EventRestrict and EventDone.
	Token uint64
	// Latency and ValidFor: see EventKeepAlive.
	Latency  time.Duration
	ValidFor time.Duration
	// Err is the failure, for EventRecordLost.
	Err error
}

// Metrics receives a gate's observations: its phase, the nodes blocking it,
// restrict and done transitions, and the age of its record's last
// acknowledged keep-alive. github.com/reconkit/reconkit/prommetrics
// turns them into collectors.
//
// Threading contract: Observe is called from the gate's own goroutines,
// possibly concurrently; it must not block and must not call back into the
// gate.
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

// Reasons of the events a Gate records (Config.Events).
const (
	// ReasonRestricting (Normal): the leader found a status that admits
	// releases its state would break, and waits for those nodes to go.
	ReasonRestricting = "Restricting"
	// ReasonRestricted (Normal): the leader wrote the restricted status.
	ReasonRestricted = "Restricted"
	// ReasonUpgradeDone (Normal): the leader's initial reconcile finished
	// and it wrote the done status.
	ReasonUpgradeDone = "UpgradeDone"
	// ReasonRecordLost (Warning): this node's record was lost; the node
	// must stop serving.
	ReasonRecordLost = "RecordLost"
	// ReasonFencedOff (Warning): the store's fence holds a token above
	// the live term's own, so the leader cannot reconcile. Either a later
	// leader exists (the term is about to end) or tokens went back (a
	// Lease recreated by an old client, an etcd backup restored under the
	// store); the message names the fence, both tokens and how to clear
	// it. Recorded once while the same fence holds the same token, however
	// many terms it refuses; the error log says the same.
	ReasonFencedOff = "FencedOff"
	// ReasonStatusMissing (Warning): the leader found no status, or one
	// that does not decode, while other nodes have records: the status
	// may have been deleted or damaged under serving nodes. The leader
	// reconciles only once no node below its minimum compatible release
	// has a record.
	ReasonStatusMissing = "StatusMissing"
)

// observe fills the observation's node and phase and hands it to the hook.
func (g *Gate) observe(o Observation) {
	if g.cfg.Metrics == nil {
		return
	}
	o.NodeID = g.cfg.NodeID
	o.Phase = g.Phase()
	g.cfg.Metrics.Observe(o)
}

// event records an event if the host asked for them. Callers record an
// event before the matching observation, so whoever saw the observation
// finds the event recorded.
func (g *Gate) event(eventtype, reason, message string) {
	if g.cfg.Events != nil {
		g.cfg.Events.Event(eventtype, reason, message)
	}
}

// observeBlocking is called by the tracker when the number of blocking
// nodes changed.
func (g *Gate) observeBlocking(n int) {
	g.observe(Observation{Event: EventBlocking, Blocking: n})
}
