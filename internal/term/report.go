package term

import (
	"errors"
	"fmt"
	"time"

	"github.com/reconkit/reconkit/election"
)

// Event types, as Kubernetes names them.
const (
	eventNormal  = "Normal"
	eventWarning = "Warning"
)

// Reporter sends an elector's observations and events to the hooks of its
// configuration; nil hooks mean none.
type Reporter struct {
	Metrics  election.Metrics
	Events   election.EventRecorder
	Backend  string // "etcd" or "lease"
	Election string // the etcd key prefix, or the Lease's namespace/name
	Identity string
}

// observe fills the reporter's fields into o and sends it.
func (r Reporter) observe(o election.Observation) {
	if r.Metrics == nil {
		return
	}
	o.Backend, o.Election, o.Identity = r.Backend, r.Election, r.Identity
	r.Metrics.Observe(o)
}

// Acquired reports the start of a term. Here and in Ended, the event is
// recorded before the observation, so a host (or a test) that saw the
// observation can rely on the event being recorded too.
func (r Reporter) Acquired(token election.Token, latency, handover time.Duration) {
	if r.Events != nil {
		r.Events.Event(eventNormal, election.ReasonLeaderElected, fmt.Sprintf("%s became leader of %s %s (token %d)", r.Identity, r.Backend, r.Election, token))
	}
	r.observe(election.Observation{Event: election.EventAcquired, Token: token, Latency: latency, Handover: handover})
}

// Renewed reports a renewal attempt: err nil for a success.
func (r Reporter) Renewed(token election.Token, latency, slack time.Duration, err error) {
	ev := election.EventRenewed
	if err != nil {
		ev = election.EventRenewFailed
	}
	r.observe(election.Observation{Event: ev, Token: token, Latency: latency, Slack: slack, Err: err})
}

// Ended reports the end of a term from its context's cause.
func (r Reporter) Ended(token election.Token, cause error) {
	if errors.Is(cause, election.ErrResigned) || errors.Is(cause, election.ErrClosed) {
		if r.Events != nil {
			r.Events.Event(eventNormal, election.ReasonResigned, fmt.Sprintf("%s resigned as leader of %s %s (token %d)", r.Identity, r.Backend, r.Election, token))
		}
		r.observe(election.Observation{Event: election.EventResigned, Token: token})
		return
	}
	if r.Events != nil {
		r.Events.Event(eventWarning, election.ReasonLeadershipLost, fmt.Sprintf("%s lost leadership of %s %s (token %d): %v", r.Identity, r.Backend, r.Election, token, cause))
	}
	r.observe(election.Observation{Event: election.EventLost, Token: token, Err: cause})
}
