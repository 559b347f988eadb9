package checkpoint

import (
	"context"
	"fmt"
	"time"

	"github.com/go-logr/logr"
)

func (c *Controller[T]) trialMessage(id string) string {
	return fmt.Sprintf("using assigned checkpoint %q on trial since %s (%d more starts allowed)",
		id, c.trialStart.UTC().Format(time.RFC3339), c.st.TriesLeft)
}

// Confirm ends the running trial now, making the assigned configuration
// last-known-good, as an operator confirms a configuration in try mode. It
// fails with ErrNoTrial when nothing is on trial.
func (c *Controller[T]) Confirm(ctx context.Context) (Status[T], error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.status.Phase != PhaseTrial {
		return c.status, ErrNoTrial
	}
	if err := c.graduate(ctx, logr.FromContextOrDiscard(ctx), "was confirmed"); err != nil {
		return c.status, err
	}
	return c.status, nil
}

// check is one trial check: probe, then graduate or roll back. It also
// retries writing a state record that failed before.
func (c *Controller[T]) check(ctx context.Context) error {
	log := logr.FromContextOrDiscard(ctx)
	c.mu.Lock()
	if c.dirty {
		c.persist(ctx, log, "record the configuration state")
	}
	st, trial := c.status, c.trial
	c.mu.Unlock()
	if st.Phase != PhaseTrial {
		return nil
	}
	var probeErr error
	if c.cfg.Probe != nil {
		probeErr = c.cfg.Probe(ctx, st.Config)
	}
	if ctx.Err() != nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.trial != trial {
		return nil // assigned, confirmed or rolled back meanwhile
	}
	if probeErr != nil {
		why := fmt.Sprintf("health probe failed during the trial of checkpoint %q: %v", st.ID, probeErr)
		return c.rollback(ctx, log, ReasonProbeFailed, why)
	}
	if c.clock.Since(c.trialStart) < c.cfg.TrialDuration {
		return nil
	}
	return c.graduate(ctx, log, fmt.Sprintf("passed its %v trial", c.cfg.TrialDuration))
}

// graduate makes the configuration on trial last-known-good; c.mu is held.
// If the record cannot be written the trial goes on and the next check
// tries again.
func (c *Controller[T]) graduate(ctx context.Context, log logr.Logger, how string) error {
	st := c.status
	next := c.st.clone()
	next.LastKnownGood, next.LastKnownGoodHash = next.Assigned, next.AssignedHash
	next.Active, next.Error, next.TriesLeft = next.Assigned, nil, 0
	if err := c.cfg.Store.SetState(ctx, next); err != nil {
		return fmt.Errorf("graduate %q: %w", st.ID, err)
	}
	c.st, c.dirty = next, false
	c.trial++
	st.Phase, st.TrialStart, st.TriesLeft = PhaseLastKnownGood, time.Time{}, 0
	st.Condition = condition(ConditionTrue, ReasonLastKnownGood, fmt.Sprintf("checkpoint %q %s and is last-known-good", st.ID, how))
	log.Info("configuration passed its trial", "id", st.ID, "how", how)
	c.setStatus(st)
	c.confirmed(c.clock.Since(c.trialStart))
	return nil
}
