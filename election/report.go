package election

import (
	"errors"
	"fmt"
	"time"
)

// Reasons of the events electors record through Config.Events.
const (
	// ReasonLeaderElected (Normal): this candidate began a term.
	ReasonLeaderElected = "LeaderElected"
	// ReasonLeadershipLost (Warning): a term ended without Resign.
	ReasonLeadershipLost = "LeadershipLost"
	// ReasonResigned (Normal): a term ended through Resign or Close.
	ReasonResigned = "Resigned"
)

// Event types, as Kubernetes names them.
const (
	eventNormal  = "Normal"
	eventWarning = "Warning"
)

// reporter sends an elector's observations and events to the hooks of its
// configuration; nil hooks mean none.
type reporter struct {
	metrics  Metrics
	events   EventRecorder
	backend  string
	election string
	identity string
}

// observe fills the reporter's fields into o and sends it.
func (r reporter) observe(o Observation) {
	if r.metrics == nil {
		return
	}
	o.Backend, o.Election, o.Identity = r.backend, r.election, r.identity
	r.metrics.Observe(o)
}

// acquired reports the start of a term. Here and in ended, the event is
// recorded before the observation, so a host (or a test) that saw the
// observation can rely on the event being recorded too.
func (r reporter) acquired(token Token, latency, handover time.Duration) {
	if r.events != nil {
		r.events.Event(eventNormal, ReasonLeaderElected, fmt.Sprintf("%s became leader of %s %s (token %d)", r.identity, r.backend, r.election, token))
	}
	r.observe(Observation{Event: EventAcquired, Token: token, Latency: latency, Handover: handover})
}

// renewed reports a renewal attempt: err nil for a success.
func (r reporter) renewed(token Token, latency, slack time.Duration, err error) {
	ev := EventRenewed
	if err != nil {
		ev = EventRenewFailed
	}
	r.observe(Observation{Event: ev, Token: token, Latency: latency, Slack: slack, Err: err})
}

// ended reports the end of a term from its context's cause.
func (r reporter) ended(token Token, cause error) {
	if errors.Is(cause, ErrResigned) || errors.Is(cause, ErrClosed) {
		if r.events != nil {
			r.events.Event(eventNormal, ReasonResigned, fmt.Sprintf("%s resigned as leader of %s %s (token %d)", r.identity, r.backend, r.election, token))
		}
		r.observe(Observation{Event: EventResigned, Token: token})
		return
	}
	if r.events != nil {
		r.events.Event(eventWarning, ReasonLeadershipLost, fmt.Sprintf("%s lost leadership of %s %s (token %d): %v", r.identity, r.backend, r.election, token, cause))
	}
	r.observe(Observation{Event: EventLost, Token: token, Err: cause})
}
