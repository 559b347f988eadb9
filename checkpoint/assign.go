package checkpoint

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-logr/logr"
)

// Assign makes payload the assigned configuration: it parses and validates
// it (failures wrap ErrInvalidConfig and store nothing), saves it as
// checkpoint src.ID() (or [HashID] when src has no UID, or when src.ID()
// already names a checkpoint with other content), records it as
// assigned with MaxTrialStarts-1 starts left, and starts its trial, timed
// from now. The returned Status holds the parsed configuration; the host
// applies it (or restarts, after which Bootstrap starts the trial again).
//
// Assigning the payload that runs changes nothing. A payload equal to the
// last-known-good one needs no trial and clears a failure at once. A
// payload that was rolled back before, under any checkpoint ID, is refused
// with ErrRejected, and the condition says why.
//
// Assign is newer than any delivery of Config.Source that Run is still
// retrying: that retry stops.
func (c *Controller[T]) Assign(ctx context.Context, payload []byte, src Source) (Status[T], error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.assignSeq++
	return c.assign(ctx, payload, src)
}

// assign does the work of Assign; c.mu is held.
func (c *Controller[T]) assign(ctx context.Context, payload []byte, src Source) (Status[T], error) {
	hash := HashPayload(payload)
	if !c.bootstrapped {
		return Status[T]{}, ErrNotBootstrapped
	}
	log := logr.FromContextOrDiscard(ctx)
	id := HashID(payload)
	if src.UID != "" {
		var err error
		if id, err = src.ID(); err != nil {
			st := c.status
			st.Condition = condition(ConditionFalse, ReasonSourceInvalid,
				fmt.Sprintf("configuration from %s has no usable checkpoint ID: %v; still using %s", src.Origin, err, configName(c.status.ID)))
			c.setStatus(st)
			return c.status, fmt.Errorf("assign: %w", err)
		}
	}
	if c.status.Phase != PhaseRolledBack && hash == c.activeHash && (c.status.ID != "" || c.st.Assigned != "") {
		if c.status.Condition.Status == ConditionFalse {
			// An invalid or refused assignment came in between; the
			// running payload is assigned again.
			st := c.status
			st.Condition = c.okCondition(st)
			c.setStatus(st)
		}
		return c.status, nil
	}
	if f, bad := c.st.RejectedHash(hash); bad {
		st := c.status
		st.Condition = condition(ConditionFalse, f.Reason,
			fmt.Sprintf("configuration %q from %s has the payload of checkpoint %q, rolled back before: %s; still using %s",
				id, src.Origin, f.ID, f.Message, configName(c.status.ID)))
		c.setStatus(st)
		return c.status, fmt.Errorf("assign %q: %w: %s", id, ErrRejected, f.Message)
	}
	cfg, err := c.cfg.Parse(payload)
	reason, step := ReasonParseFailed, stepParse
	if err == nil {
		reason, step = ReasonValidateFailed, stepValidate
		err = c.cfg.Validate(cfg)
	}
	if err != nil {
		msg := fmt.Sprintf("failed to %s assigned configuration %q from %s: %v; still using %s", step, id, src.Origin, err, configName(c.status.ID))
		st := c.status
		st.Condition = condition(ConditionFalse, reason, msg)
		c.setStatus(st)
		return c.status, fmt.Errorf("assign %q: %w: %w", id, ErrInvalidConfig, err)
	}
	now := c.clock.Now()
	if c.st.LastKnownGood != "" && hash == c.st.LastKnownGoodHash {
		next := c.st.clone()
		next.Assigned, next.AssignedHash, next.AssignedAt = next.LastKnownGood, hash, now
		next.Active, next.Error, next.TriesLeft = next.LastKnownGood, nil, 0
		if err := c.cfg.Store.SetState(ctx, next); err != nil {
			return c.storeFailed(id, src, err)
		}
		c.st, c.activeHash, c.dirty = next, hash, false
		c.trial++
		st := Status[T]{Config: cfg, ID: next.LastKnownGood, Assigned: next.LastKnownGood, Phase: PhaseLastKnownGood,
			Condition: condition(ConditionTrue, ReasonLastKnownGood,
				fmt.Sprintf("assigned configuration %q from %s is last-known-good checkpoint %q", id, src.Origin, next.LastKnownGood))}
		log.Info("configuration assigned", "id", next.LastKnownGood, "origin", src.Origin, "phase", st.Phase)
		c.setStatus(st)
		return c.status, nil
	}
	err = c.cfg.Store.Save(ctx, Checkpoint{ID: id, Payload: payload, Source: src, Created: now})
	if errors.Is(err, ErrConflict) && id != HashID(payload) {
		// The source named other content with this ID before (an origin
		// that does not bump its version, such as client-go's fake
		// clientset): the payload is named by its hash instead, so that
		// the update is not lost.
		log.Info("checkpoint ID already names other content; naming the payload by its hash", "id", id, "origin", src.Origin)
		id = HashID(payload)
		err = c.cfg.Store.Save(ctx, Checkpoint{ID: id, Payload: payload, Source: src, Created: now})
	}
	if err != nil {
		return c.storeFailed(id, src, err)
	}
	next := c.st.clone()
	next.Assigned, next.AssignedHash, next.AssignedAt = id, hash, now
	next.Active, next.Error, next.TriesLeft = id, nil, c.cfg.MaxTrialStarts-1
	if err := c.cfg.Store.SetState(ctx, next); err != nil {
		return c.storeFailed(id, src, err)
	}
	c.st, c.activeHash, c.dirty = next, hash, false
	c.trial++
	c.trialStart = now
	st := Status[T]{Config: cfg, ID: id, Assigned: id, Phase: PhaseTrial, TrialStart: now, TriesLeft: next.TriesLeft}
	st.Condition = condition(ConditionTrue, ReasonTrial, c.trialMessage(id))
	log.Info("configuration assigned", "id", id, "origin", src.Origin, "phase", st.Phase)
	c.setStatus(st)
	c.trialStarted()
	return c.status, nil
}

// storeFailed reports that assigned checkpoint id could not be stored or
// recorded: the configuration that runs stays, and the condition says why;
// c.mu is held.
func (c *Controller[T]) storeFailed(id string, src Source, err error) (Status[T], error) {
	st := c.status
	st.Condition = condition(ConditionFalse, ReasonSaveFailed,
		fmt.Sprintf("failed to store assigned configuration %q from %s: %v; still using %s", id, src.Origin, err, configName(c.status.ID)))
	c.setStatus(st)
	return c.status, fmt.Errorf("assign %q: %w", id, err)
}

// okCondition is the True condition of a status in PhaseTrial or
// PhaseLastKnownGood.
func (c *Controller[T]) okCondition(st Status[T]) Condition {
	if st.Phase == PhaseTrial {
		return condition(ConditionTrue, ReasonTrial, c.trialMessage(st.ID))
	}
	if st.Phase == PhaseLocal {
		return condition(ConditionTrue, ReasonLocal, "no configuration assigned; using the local configuration")
	}
	return condition(ConditionTrue, ReasonLastKnownGood, fmt.Sprintf("using assigned checkpoint %q, which is last-known-good", st.ID))
}

// configName names the configuration of checkpoint id for people.
func configName(id string) string {
	if id == "" {
		return "the local configuration"
	}
	return fmt.Sprintf("checkpoint %q", id)
}
