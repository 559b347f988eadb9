// Package leadership holds what the election and versiongate packages
// share without importing each other: the one leadership-lost sentinel, so
// that errors.Is matches it whichever package returned it.
package leadership

import "errors"

// ErrLost is the cause of a term that ended because leadership was lost.
// election.ErrLeadershipLost and versiongate.ErrLeadershipLost are this
// value.
var ErrLost = errors.New("election: leadership lost")
