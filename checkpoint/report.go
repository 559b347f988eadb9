package checkpoint

import (
	"time"
)

// setStatus publishes st; c.mu must be held. It reports the condition
// to Conditions when its status, reason or message changed, and the phase
// to Metrics when it changed (both also for the first status).
func (c *Controller[T]) setStatus(st Status[T]) {
	old := c.status.Condition
	first := old.Type != ConditionConfigOK
	st.Condition.LastTransitionTime = c.clock.Now()
	if !first && old.Status == st.Condition.Status {
		st.Condition.LastTransitionTime = old.LastTransitionTime
	}
	phaseChanged := first || c.status.Phase != st.Phase
	c.status = st
	c.statuses.Set(st)
	cond := st.Condition
	if c.cfg.Conditions != nil && (first || old.Status != cond.Status || old.Reason != cond.Reason || old.Message != cond.Message) {
		c.cfg.Conditions.ReportCondition(cond.Type, string(cond.Status), cond.Reason, cond.Message)
	}
	if phaseChanged {
		c.observe(Observation{Event: EventPhase, ID: st.ID})
	}
}

// observe reports o with the current phase; c.mu must be held.
func (c *Controller[T]) observe(o Observation) {
	if c.cfg.Metrics == nil {
		return
	}
	o.Phase = c.status.Phase
	c.cfg.Metrics.Observe(o)
}

// event records a Kubernetes-style event; c.mu must be held.
func (c *Controller[T]) event(eventtype, reason, message string) {
	if c.cfg.Events != nil {
		c.cfg.Events.Event(eventtype, reason, message)
	}
}

// trialStarted reports that the trial of the assigned checkpoint started,
// after the status saying so was set; c.mu must be held.
func (c *Controller[T]) trialStarted() {
	id := c.status.ID
	c.observe(Observation{Event: EventTrialStarted, ID: id, TriesLeft: c.st.TriesLeft})
	c.event(eventTypeNormal, EventReasonTrialStarted, c.status.Condition.Message)
}

// confirmed reports that the configuration on trial became last-known-good
// after trialTime; c.mu must be held.
func (c *Controller[T]) confirmed(trialTime time.Duration) {
	c.observe(Observation{Event: EventConfirmed, ID: c.status.ID, TrialTime: trialTime})
	c.event(eventTypeNormal, EventReasonConfirmed, c.status.Condition.Message)
}

// rolledBack reports that assigned checkpoint id was rolled back for
// reason after trialTime, after the status saying so was set; c.mu must
// be held.
func (c *Controller[T]) rolledBack(id, reason string, trialTime time.Duration) {
	c.observe(Observation{Event: EventRolledBack, ID: id, Reason: reason, TrialTime: trialTime})
	c.event(eventTypeWarning, EventReasonRolledBack, reason+": "+c.status.Condition.Message)
}

func condition(status ConditionStatus, reason, msg string) Condition {
	return Condition{Type: ConditionConfigOK, Status: status, Reason: reason, Message: msg}
}
