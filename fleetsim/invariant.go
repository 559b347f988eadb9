package fleetsim

import (
	"fmt"
	"strings"
	"time"
)

// Invariant names a guarantee the simulator checks while a run goes on.
type Invariant string

// The invariants, each checking a sentence of a doc.go or of the project's
// design rules (quoted by Guarantee).
const (
	// OneTerm: no write carrying a term's token reaches the provider's
	// fence while a write context of a lower term is still live.
	OneTerm Invariant = "one-term"
	// FenceOrder: the writes that pass the fence carry tokens that never go
	// down.
	FenceOrder Invariant = "fence-order"
	// Converges: once the nemesis stopped, the provider holds what the
	// fleet describes, with no duplicate and no leaked object.
	Converges Invariant = "converges"
	// Stops: an agent's Run returns within StopTimeout of its context's
	// end, with nil, and leaves no goroutine behind.
	Stops Invariant = "stops"
	// Lives: an agent's Run does not return while its context is live.
	Lives Invariant = "lives"
	// RequestBudget: no agent sends more than its Budget.
	RequestBudget Invariant = "request-budget"
	// LKGProven: a checkpoint becomes last-known-good only after a trial
	// of at least Config.CheckpointTrial started in the same run.
	LKGProven Invariant = "lkg-proven"
	// NodeReady: a Node the world's lifecycle marked Unknown is Ready
	// again within Nodes.Within of its agent reaching the apiserver.
	NodeReady Invariant = "node-ready"
	// TermChurn: no Lease begins more than MaxTermsPerMinute terms
	// (increments of its leaseTransitions) within a minute.
	TermChurn Invariant = "term-churn"
	// NoIncompatibleServing: no agent serves below the minimum compatible
	// release of a leader whose write passes the fence.
	NoIncompatibleServing Invariant = "no-incompatible-serving"
	// GoneRewatch: no run watches again from a resourceVersion the server
	// answered 410 Gone to, for the same resource and selectors.
	GoneRewatch Invariant = "gone-rewatch"
)

// Guarantee returns the documented sentence inv checks.
func (inv Invariant) Guarantee() string {
	switch inv {
	case OneTerm:
		return "election (doc.go): at most one candidate's term context is live at any instant of real time"
	case FenceOrder:
		return "lbrecon.Fence: keeps the highest fencing token that wrote through it, and refuses lower ones"
	case Converges:
		return "lbrecon (doc.go) and DESIGN: a loop re-asserts what it owns; nothing duplicated, nothing leaked"
	case Stops:
		return "reconkit (doc.go): Run blocks until every goroutine it started has exited and returns nil when its context ends"
	case Lives:
		return "reconkit (doc.go): Run returns a wrapped error only for a real failure"
	case RequestBudget:
		return "DESIGN: after 30 s of the same answer, at most one request per second per agent; no loop spins"
	case LKGProven:
		return "checkpoint (doc.go): only a configuration that passed its trial in one process, or was confirmed, becomes last-known-good"
	case NodeReady:
		return "nodestatus (doc.go): after heartbeats resume, the Ready status is back within one retry wait (at most 5s) of the heal"
	case TermChurn:
		return "election/lease (doc.go): a candidate without Config.Coordinated clears PreferredHolder when it acquires and renews the Lease, so a value left over never makes it yield at every renewal; a term ends only when it is lost, resigned or preempted"
	case NoIncompatibleServing:
		return "versiongate (doc.go): no node passes WaitReady on a status whose minimum compatible release is above its own, and a leader reconciles only once no member node is below it"
	case GoneRewatch:
		return "DESIGN: a 410 means one fresh read from a resourceVersion the server can serve, never a loop"
	}
	return "unknown invariant"
}

// Violation is one broken invariant, at the simulated time it was seen.
type Violation struct {
	At        time.Duration
	Invariant Invariant
	Agent     string // empty when no one agent is to blame
	Detail    string
}

func (v Violation) String() string {
	who := ""
	if v.Agent != "" {
		who = v.Agent + ": "
	}
	return fmt.Sprintf("%s at %s: %s%s\n  guarantee: %s", v.Invariant, v.At.Truncate(time.Millisecond), who, v.Detail,
		v.Invariant.Guarantee())
}

// Result is what one run saw.
type Result struct {
	Seed       uint64
	Violations []Violation // the first ends the run
	Timeline   []Entry
	Simulated  time.Duration // simulated time from start to end
	AgentTime  time.Duration // simulated time the agents ran, summed
	Events     int           // nemesis events applied
	Requests   int           // requests the agents sent to the apiserver
}

// Err returns nil when no invariant was violated, and otherwise an error that
// gives the seed, the violation, how to run the seed again, and the timeline
// from two minutes before the violation to ten seconds after it.
func (r Result) Err() error {
	if len(r.Violations) == 0 {
		return nil
	}
	v := r.Violations[0]
	var b strings.Builder
	fmt.Fprintf(&b, "fleetsim: seed %d: %s\nrun it again: go test -run <this test> -fleetsim.seed=%d\n", r.Seed, v, r.Seed)
	fmt.Fprintf(&b, "timeline from %s to %s:\n", (v.At - 2*time.Minute).Truncate(time.Second), v.At+10*time.Second)
	b.WriteString(Window(r.Timeline, v.At, 2*time.Minute, 10*time.Second))
	for _, more := range r.Violations[1:] {
		fmt.Fprintf(&b, "also: %s\n", more)
	}
	return fmt.Errorf("%s", b.String())
}
