// Package leadership holds what the election and versiongate packages
// share without importing each other: the one leadership-lost sentinel, so
// that errors.Is matches it whichever package returned it.
package leadership

import (
	"context"
	"errors"
)

// ErrLost is the cause of a term that ended because leadership was lost.
// election.ErrLeadershipLost and versiongate.ErrLeadershipLost are this
// value.
var ErrLost = errors.New("election: leadership lost")

// Term is one term of leadership. election.Leadership is this type; see its
// documentation.
type Term interface {
	// Context ends the moment the term ends: lost, resigned, or the
	// elector closed. context.Cause tells which (ErrLeadershipLost,
	// ErrResigned or ErrClosed).
	Context() context.Context

	// Token returns the term's fencing token.
	Token() uint64

	// Identity returns the leader's identity.
	Identity() string

	// Resign ends the term and releases leadership so that a successor can
	// take over at once. The term context ends before the release is sent,
	// and Resign returns only after the release completed or failed: a nil
	// error means the server has let leadership go. A failed Resign can be
	// called again to retry the release; concurrent calls wait for the one
	// in flight. Resign after a lost term, or after a completed release,
	// returns nil.
	Resign(ctx context.Context) error
}
