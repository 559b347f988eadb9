package checkpoint

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-logr/logr"
)

// Rollback ends the running trial now as a failure: the payload is
// rejected (persistently, by hash) and last-known-good, or the local
// configuration, runs. why is recorded in the condition. It fails with
// ErrNoTrial when nothing is on trial.
func (c *Controller[T]) Rollback(ctx context.Context, why string) (Status[T], error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.status.Phase != PhaseTrial {
		return c.status, ErrNoTrial
	}
	msg := fmt.Sprintf("trial of checkpoint %q rolled back by request: %s", c.status.ID, why)
	if err := c.rollback(ctx, logr.FromContextOrDiscard(ctx), ReasonManualRollback, msg); err != nil {
		return c.status, err
	}
	return c.status, nil
}

// rollback ends the trial as a failure; c.mu is held. The payload's hash
// is rejected and the assigned checkpoint stays assigned with the failure
// as its error, so a restart does not try it again; if the record cannot
// be written, the rollback stands in this process and the write is retried
// at every check.
func (c *Controller[T]) rollback(ctx context.Context, log logr.Logger, reason, why string) error {
	cur := c.st.Assigned
	c.st = c.st.Reject(Failure{Hash: c.st.AssignedHash, ID: cur, Reason: reason, Message: why, At: c.clock.Now()})
	next, err := c.fallback(ctx, cur, reason, why)
	if err != nil {
		return err
	}
	c.st.Active, c.st.TriesLeft = next.ID, 0
	c.trial++
	c.persist(ctx, log, "record the rollback")
	log.Error(errors.New(why), "configuration failed its trial; rolled back", "id", cur, "to", next.ID)
	c.setStatus(next)
	c.rolledBack(cur, reason, c.clock.Since(c.trialStart))
	return nil
}

// fallback returns the status after assigned checkpoint cur failed: the
// last-known-good configuration, or the local one if that fails too or is
// cur itself.
func (c *Controller[T]) fallback(ctx context.Context, cur, reason, why string) (Status[T], error) {
	lkg := c.st.LastKnownGood
	if lkg == "" || lkg == cur {
		return Status[T]{Config: c.cfg.Local, Phase: PhaseRolledBack, Assigned: cur,
			Condition: condition(ConditionFalse, reason, why+"; using the local configuration")}, nil
	}
	cfg, hash, step, err := c.load(ctx, lkg, c.st.LastKnownGoodHash)
	if err != nil {
		if ctx.Err() != nil {
			return Status[T]{}, ctx.Err()
		}
		c.activeHash = ""
		return Status[T]{Config: c.cfg.Local, Phase: PhaseRolledBack, Assigned: cur,
			Condition: condition(ConditionFalse, ReasonLKGFailed,
				fmt.Sprintf("%s; then failed to %s last-known-good checkpoint %q: %v; using the local configuration", why, step, lkg, err))}, nil
	}
	c.activeHash = hash
	return Status[T]{Config: cfg, ID: lkg, Phase: PhaseRolledBack, Assigned: cur,
		Condition: condition(ConditionFalse, reason, fmt.Sprintf("%s; using last-known-good checkpoint %q", why, lkg))}, nil
}

// forgetLost stops naming id as last-known-good once the store says its
// checkpoint is gone (err wraps ErrNotFound): it can never run again, and
// a record naming it could not be written, so no new assignment could be
// recorded either. c.mu is held.
func (c *Controller[T]) forgetLost(id string, err error) {
	if id != "" && id == c.st.LastKnownGood && errors.Is(err, ErrNotFound) {
		c.st.LastKnownGood, c.st.LastKnownGoodHash = "", ""
	}
}
