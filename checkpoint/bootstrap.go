package checkpoint

import (
	"context"
	"fmt"

	"github.com/go-logr/logr"
)

// Bootstrap decides which configuration to run, in the order of the
// kubelet's dynamic configuration: validate the local configuration (an
// error if invalid), open the store, then load, parse and validate the
// assigned checkpoint; if any step fails, or the assigned payload was
// rolled back before, do the same for the last-known-good checkpoint, and if
// that fails too, or nothing is assigned, use the local configuration.
// Failures never stop the host: they are reported in the ConfigOK condition
// with a reason naming the failing step and a message naming the
// checkpoint, and recorded in the store so that they survive restarts.
//
// If the assigned checkpoint is on trial, Bootstrap starts the trial again
// (timed from now) after persisting that one more start was used; when no
// start is left, the configuration is rolled back as a crash loop. If the
// start cannot be recorded, the trial does not start.
//
// The only errors are ErrInvalidLocal and the end of ctx.
func (c *Controller[T]) Bootstrap(ctx context.Context) (Status[T], error) {
	log := logr.FromContextOrDiscard(ctx)
	if err := c.cfg.Validate(c.cfg.Local); err != nil {
		return Status[T]{}, fmt.Errorf("%w: %w", ErrInvalidLocal, err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	st, err := c.decide(ctx)
	if err != nil {
		return Status[T]{}, err
	}
	if st.Condition.Status == ConditionFalse {
		log.Error(nil, "assigned configuration not used", "reason", st.Condition.Reason, "message", st.Condition.Message)
	} else {
		log.Info("configuration chosen", "id", st.ID, "phase", st.Phase)
	}
	c.bootstrapped = true
	c.trial++
	c.setStatus(st)
	if c.notify != nil {
		c.notify()
		c.notify = nil
	}
	return c.status, nil
}

// decide does the work of Bootstrap; c.mu is held.
func (c *Controller[T]) decide(ctx context.Context) (Status[T], error) {
	s := c.cfg.Store
	log := logr.FromContextOrDiscard(ctx)
	unavailable := func(msg string) Status[T] {
		return Status[T]{Config: c.cfg.Local, Phase: PhaseRolledBack,
			Condition: condition(ConditionFalse, ReasonStoreUnavailable, msg)}
	}
	if err := s.Initialize(ctx); err != nil {
		if ctx.Err() != nil {
			return Status[T]{}, ctx.Err()
		}
		return unavailable(fmt.Sprintf("failed to open the checkpoint store: %v; using the local configuration", err)), nil
	}
	st, err := s.State(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return Status[T]{}, ctx.Err()
		}
		return unavailable(fmt.Sprintf("failed to read which checkpoint is assigned: %v; using the local configuration", err)), nil
	}
	c.st, c.activeHash = st, ""
	if st.Assigned == "" {
		c.setActive(ctx, "")
		return Status[T]{Config: c.cfg.Local, Phase: PhaseLocal,
			Condition: condition(ConditionTrue, ReasonLocal, "no configuration assigned; using the local configuration")}, nil
	}
	cur := st.Assigned
	if f, bad := st.RejectedHash(st.AssignedHash); bad {
		// Rolled back before: stay rolled back, for the same reason.
		next, err := c.fallback(ctx, cur, f.Reason, f.Message)
		if err != nil {
			return Status[T]{}, err
		}
		c.setActive(ctx, next.ID)
		return next, nil
	}
	cfg, hash, step, err := c.load(ctx, cur, st.AssignedHash)
	if err != nil {
		if ctx.Err() != nil {
			return Status[T]{}, ctx.Err()
		}
		reason := stepReason(step)
		why := fmt.Sprintf("failed to %s assigned checkpoint %q: %v", step, cur, err)
		f := Failure{Hash: st.AssignedHash, ID: cur, Reason: reason, Message: why, At: c.clock.Now()}
		if step == stepLoad {
			// The file is damaged, not the payload: the same payload
			// assigned again may be saved and tried.
			c.st.Error = &f
		} else {
			c.st = c.st.Reject(f)
		}
		next, err := c.fallback(ctx, cur, reason, why)
		if err != nil {
			return Status[T]{}, err
		}
		c.st.Active, c.st.TriesLeft = next.ID, 0
		c.persist(ctx, log, "record the failed assignment")
		c.notify = func() { c.rolledBack(cur, reason, 0) }
		return next, nil
	}
	out := Status[T]{Config: cfg, ID: cur, Assigned: cur}
	if cur == st.LastKnownGood {
		c.activeHash = hash
		c.setActive(ctx, cur)
		out.Phase = PhaseLastKnownGood
		out.Condition = condition(ConditionTrue, ReasonLastKnownGood, fmt.Sprintf("using assigned checkpoint %q, which is last-known-good", cur))
		return out, nil
	}
	if st.TriesLeft <= 0 {
		why := fmt.Sprintf("checkpoint %q did not pass its %v trial within %d starts (crash loop)", cur, c.cfg.TrialDuration, c.cfg.MaxTrialStarts)
		c.st = c.st.Reject(Failure{Hash: st.AssignedHash, ID: cur, Reason: ReasonCrashLoop, Message: why, At: c.clock.Now()})
		next, err := c.fallback(ctx, cur, ReasonCrashLoop, why)
		if err != nil {
			return Status[T]{}, err
		}
		c.st.Active = next.ID
		c.persist(ctx, log, "record the crash-loop rollback")
		c.notify = func() { c.rolledBack(cur, ReasonCrashLoop, 0) }
		return next, nil
	}
	// Record the start before starting: a crash from here on counts.
	next := c.st.clone()
	next.TriesLeft--
	next.Active, next.Error = cur, nil
	if err := s.SetState(ctx, next); err != nil {
		if ctx.Err() != nil {
			return Status[T]{}, ctx.Err()
		}
		why := fmt.Sprintf("cannot record the start of the trial of checkpoint %q: %v", cur, err)
		fb, ferr := c.fallback(ctx, cur, ReasonStoreUnavailable, why)
		if ferr != nil {
			return Status[T]{}, ferr
		}
		c.notify = func() { c.rolledBack(cur, ReasonStoreUnavailable, 0) }
		return fb, nil
	}
	c.st, c.activeHash = next, hash
	c.trialStart = c.clock.Now()
	out.Phase, out.TrialStart, out.TriesLeft = PhaseTrial, c.trialStart, next.TriesLeft
	out.Condition = condition(ConditionTrue, ReasonTrial, c.trialMessage(cur))
	c.notify = c.trialStarted
	return out, nil
}

// setActive records id as active if it is not yet; c.mu is held.
func (c *Controller[T]) setActive(ctx context.Context, id string) {
	if c.st.Active == id && !c.dirty {
		return
	}
	c.st.Active = id
	c.persist(ctx, logr.FromContextOrDiscard(ctx), "record the active configuration")
}

// persist writes c.st; a failure is logged and retried at the next check.
func (c *Controller[T]) persist(ctx context.Context, log logr.Logger, what string) {
	if err := c.cfg.Store.SetState(ctx, c.st); err != nil {
		c.dirty = true
		log.Error(err, "failed to "+what+"; will retry")
		return
	}
	c.dirty = false
}

// load loads, parses and validates checkpoint id, naming the step that
// failed. wantHash, if set, must match the stored payload.
func (c *Controller[T]) load(ctx context.Context, id, wantHash string) (cfg T, hash, step string, err error) {
	cp, err := c.cfg.Store.Load(ctx, id)
	if err != nil {
		c.forgetLost(id, err)
		return cfg, "", stepLoad, err
	}
	if wantHash != "" && cp.Hash != wantHash {
		return cfg, "", stepLoad, fmt.Errorf("payload hash %s, the state record says %s: %w", cp.Hash, wantHash, ErrCorrupt)
	}
	cfg, err = c.cfg.Parse(cp.Payload)
	if err != nil {
		return cfg, "", stepParse, err
	}
	if err := c.cfg.Validate(cfg); err != nil {
		return cfg, "", stepValidate, err
	}
	return cfg, cp.Hash, "", nil
}

func stepReason(step string) string {
	switch step {
	case stepParse:
		return ReasonParseFailed
	case stepValidate:
		return ReasonValidateFailed
	default:
		return ReasonLoadFailed
	}
}
