package lease

import (
	"time"

	"github.com/reconkit/reconkit/election"
)

// HealthCheck returns the leadership health check of e with the given
// grace, the tolerance client-go's NewLeaderHealthzAdaptor(timeout) takes
// (its examples use 20s); see election.HealthCheck.
func (e *Elector) HealthCheck(grace time.Duration) *election.HealthCheck {
	return election.NewHealthCheck(func() election.Leadership {
		if t := e.current(); t != nil {
			return t
		}
		return nil
	}, e.clock, grace)
}
