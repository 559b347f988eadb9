package checkpoint

import (
	"errors"
	"fmt"
	"net/http"
	"time"
)

// ErrTrialOverdue is wrapped by the error of a TrialCheck whose
// configuration trial has run past its TrialDuration by more than the
// grace without being decided.
var ErrTrialOverdue = errors.New("checkpoint: configuration trial overdue")

// TrialCheckName is the name under which hosts conventionally serve
// TrialCheck.
const TrialCheckName = "configTrial"

// TrialCheck returns a health check, in the shape of controller-runtime's
// healthz.Checker, that fails with an error wrapping ErrTrialOverdue while
// a configuration is on trial (PhaseTrial) more than TrialDuration plus
// grace after this process started the trial, on Config.Clock: Run
// should have confirmed or rolled it back at its first check after
// TrialDuration (every CheckInterval), so it is not running or it is
// stuck, and the configuration on trial keeps running undecided. A
// negative grace counts as zero; a grace of a few CheckIntervals rides
// out a slow probe.
//
// A rolled-back configuration (PhaseRolledBack) does not fail this check:
// the process is doing what it should, running the last-known-good
// configuration, and a restart would not change that. It is reported by
// the ConfigOK condition (False), the Warning event and the rollbacks
// metric; a host that wants /healthz to fail too adds a check of its own
// on Status().Phase. The request is not used and may be nil; the check is
// safe for concurrent use.
func (c *Controller[T]) TrialCheck(grace time.Duration) func(*http.Request) error {
	grace = max(grace, 0)
	return func(*http.Request) error {
		c.mu.Lock()
		phase, assigned, start := c.status.Phase, c.status.Assigned, c.trialStart
		c.mu.Unlock()
		if phase != PhaseTrial {
			return nil
		}
		limit := c.cfg.TrialDuration + grace
		if ran := c.clock.Since(start); ran > limit {
			return fmt.Errorf("%w: %q on trial for %v, undecided past %v (trial %v, grace %v)", ErrTrialOverdue, assigned, ran, limit, c.cfg.TrialDuration, grace)
		}
		return nil
	}
}
