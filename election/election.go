package election

import (
	"context"
	"errors"
	"time"

	"github.com/reconkit/reconkit/internal/leadership"
)

// Errors callers branch on.
var (
	// ErrNoLeader is returned by Elector.Leader when nobody leads.
	ErrNoLeader = errors.New("election: no leader")
	// ErrNotLeader is returned by guarded writes and by the Kubernetes write
	// gate when the caller does not hold valid leadership at that moment.
	ErrNotLeader = errors.New("election: not leader")
	// ErrLeadershipLost is the cause of a term context that ended because
	// leadership was lost (session or lease expired, another candidate took
	// over, the backend became unreachable for too long). It is the same
	// value as versiongate.ErrLeadershipLost, so errors.Is matches either.
	ErrLeadershipLost = leadership.ErrLost
	// ErrResigned is the cause of a term context that ended through Resign.
	ErrResigned = errors.New("election: resigned")
	// ErrClosed is returned by an Elector used after it was closed.
	ErrClosed = errors.New("election: elector closed")
	// ErrInvalidConfig is wrapped by the error of a backend's New for a
	// configuration it rejects.
	ErrInvalidConfig = errors.New("election: invalid configuration")
)

// Token is a fencing token: it strictly increases with every new term on one
// election, so a resource that remembers the highest token it has seen can
// refuse writes from a deposed leader. Zero is never a valid token.
//
// Token is an alias of uint64, the one token type of every reconkit
// package: a term of this package is a versiongate.Term as it is, and
// hosts pass tokens on without converting them.
type Token = uint64

// LeaderInfo describes who leads an election. The zero value means nobody
// leads.
type LeaderInfo struct {
	// Identity is the leader's identity; empty means no leader.
	Identity string
	// Token is the fencing token of the leader's term, when the backend
	// can tell it; 0 otherwise.
	Token Token
}

// IsZero reports whether nobody leads.
func (i LeaderInfo) IsZero() bool { return i.Identity == "" }

// Elector is one candidate in one election.
//
// Implementations are safe for concurrent use. A candidate holds at most one
// term at a time: Campaign while leading returns an error.
type Elector interface {
	// Identity returns this candidate's identity, unique per process.
	Identity() string

	// Campaign blocks until this candidate leads, and returns the term.
	// It returns ctx.Err() (wrapped) when ctx ends first, and never returns
	// a term that has already been lost.
	//
	// ctx bounds the wait only, as in etcd's concurrency.Election: once
	// Campaign returned a term, ending ctx does not end it. The term ends
	// when it is lost, when the holder calls Resign, or when the elector
	// is closed; only Resign releases it, so a holder releases leadership
	// strictly after its own leader work returned, never while it still
	// runs.
	Campaign(ctx context.Context) (Leadership, error)

	// Leader returns the current leader, or ErrNoLeader.
	Leader(ctx context.Context) (LeaderInfo, error)

	// Observe streams leader changes, including "no leader" (the zero
	// LeaderInfo), starting with the current state. A slow reader never
	// blocks the elector and never misses the latest state: intermediate
	// states may be skipped, the final one is always delivered. The channel
	// is closed when ctx ends.
	Observe(ctx context.Context) <-chan LeaderInfo
}

// Leadership is one term of leadership: its context, fencing token,
// holder identity and Resign. Methods may be called from any goroutine.
//
// It is an alias of an interface type literal rather than a defined
// type, and versiongate.Term is an alias of the identical literal: Go
// treats identical unnamed interface types as one type, so a term of any
// reconkit elector is a versiongate.Term as it is, and a function written
// for Run, func(context.Context, Leadership) error, has the same type
// wherever a reconkit package takes leader work, with neither package
// importing the other.
type Leadership = interface {
	// Context ends the moment the term ends: lost, resigned, or the
	// elector closed. context.Cause tells which (ErrLeadershipLost,
	// ErrResigned or ErrClosed).
	Context() context.Context

	// Token returns the term's fencing token: it strictly increases
	// from term to term of one election, and is never zero.
	Token() Token

	// Identity returns the leader's identity, the Elector's Identity.
	Identity() string

	// Resign ends the term and releases leadership so that a successor
	// can take over at once. The term context ends before the release is
	// sent, and Resign returns only after the release completed or
	// failed: a nil error means the server has let leadership go. A
	// failed Resign can be called again to retry the release; concurrent
	// calls wait for the one in flight. Resign after a lost term, or
	// after a completed release, returns nil.
	Resign(ctx context.Context) error
}

// Expiring is implemented by a Leadership whose validity is bounded in
// time, such as a Lease term: past ValidUntil the term is treated as lost
// even if no answer from the server said so.
type Expiring interface {
	// ValidUntil returns the instant, on the local monotonic clock, until
	// which the term is known valid.
	ValidUntil() time.Time
}

// TermHolder is implemented by an Elector that tells, without a request,
// which term it holds now: etcd.Elector, lease.Elector and electiontest's
// Candidate. It is for a host that keeps an object across terms (a
// cloud-controller-manager's load balancer implementation, a cache) and
// needs the current term's Context and Token at each call, not only
// inside the lead function Run hands a term to.
type TermHolder interface {
	// Current returns the term this candidate holds and true when its
	// Leading reports true: the term context is live and, for a term
	// that implements Expiring, the clock is before its ValidUntil.
	// Otherwise it returns nil and false. The term can end right after
	// Current returned: act under its Context, and fence writes with its
	// Token (or, on etcd, its guard), as for any term.
	Current() (Leadership, bool)
}
