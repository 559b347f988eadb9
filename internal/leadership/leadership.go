package leadership

import "errors"

// ErrLost is the cause of a term that ended because leadership was lost.
// election.ErrLeadershipLost and versiongate.ErrLeadershipLost are this
// value.
var ErrLost = errors.New("election: leadership lost")
