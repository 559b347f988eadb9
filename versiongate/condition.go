package versiongate

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-logr/logr"
)

// ConditionReleaseReady is the default type of the condition the gate
// reports (Config.ConditionType).
const ConditionReleaseReady = "ReleaseReady"

// Reasons of the condition the gate reports. ReasonRecordLost, the
// reason of the RecordLost event, serves too.
const (
	// ReasonReleaseAdmitted: True; the record is valid and the status
	// admits the local release, so WaitReady would return now.
	ReasonReleaseAdmitted = "ReleaseAdmitted"
	// ReasonRecordPending: the node record is not published yet.
	ReasonRecordPending = "RecordPending"
	// ReasonStatusPending: there is no status yet (the first leader's
	// initial reconcile has not finished).
	ReasonStatusPending = "StatusPending"
	// ReasonStatusCorrupt: the stored status does not decode.
	ReasonStatusCorrupt = "StatusCorrupt"
	// ReasonStatusNotAdmitting: the status does not admit the local
	// release, or was written by a reconciler below
	// MinimumReconcilerRelease.
	ReasonStatusNotAdmitting = "StatusNotAdmitting"
	// ReasonGateStopped: Run returned on a clean stop.
	ReasonGateStopped = "GateStopped"
)

// Condition statuses, as in Kubernetes conditions.
const (
	ConditionTrue  = "True"
	ConditionFalse = "False"
)

// ConditionReporter receives the gate's readiness as a node condition
// (Config.Conditions). Its method set is the one a node-status provider
// offers for conditions set by other components (nodestatus.Provider, and
// checkpoint's Config.Conditions takes the same), so such a provider plugs
// in directly.
//
// Threading contract: Run calls ReportCondition from one goroutine of its
// own, never concurrently with itself, in the order of the changes, and
// with no lock of the gate held: once when Run starts, at every change of
// the condition's status, reason or message, and once when Run returns
// (False, with ReasonRecordLost or ReasonGateStopped), before Run returns.
// The gate's record keeping, watches and reconcile never wait for it: a
// slow reporter only delays later reports (the newest state is reported,
// intermediate ones may be skipped). It must return promptly, since Run
// waits for it before returning, and must not call Run.
type ConditionReporter interface {
	ReportCondition(conditionType, status, reason, message string)
}

// ConditionReporterFunc adapts a function to [ConditionReporter].
type ConditionReporterFunc func(conditionType, status, reason, message string)

// ReportCondition calls f.
func (f ConditionReporterFunc) ReportCondition(conditionType, status, reason, message string) {
	f(conditionType, status, reason, message)
}

var _ ConditionReporter = ConditionReporterFunc(nil)

// conditionReporter reports changes only. It is used by one goroutine at
// a time.
type conditionReporter struct {
	r    ConditionReporter
	typ  string
	sent bool
	last [3]string
}

func (c *conditionReporter) report(status, reason, message string) {
	cur := [3]string{status, reason, message}
	if c.sent && cur == c.last {
		return
	}
	c.sent, c.last = true, cur
	c.r.ReportCondition(c.typ, status, reason, message)
}

// final reports the condition once Run ends with err.
func (c *conditionReporter) final(err error) {
	reason, message := ReasonGateStopped, "the version gate is not running"
	if errors.Is(err, ErrRecordLost) {
		reason, message = ReasonRecordLost, err.Error()
	}
	if c.sent && c.last[0] == ConditionFalse && c.last[1] == reason {
		return
	}
	c.report(ConditionFalse, reason, message)
}

// followReadiness reports whether WaitReady would return now, until ctx
// ends: the record valid (gate-owned records) and the status admitting
// the local release. It does what WaitReady does, without marking the
// gate ready.
func (g *Gate) followReadiness(ctx context.Context, c *conditionReporter) {
	lost := false
	for {
		sctx, stop := ctx, func() {}
		var waited recordState
		if g.cfg.Decode == nil {
			if lost {
				c.report(ConditionFalse, ReasonRecordLost, "the node record was lost; waiting for it to be published again")
			} else {
				c.report(ConditionFalse, ReasonRecordPending, "waiting for the node record to be published")
			}
			rctx, w, s, err := g.waitRecord(ctx)
			if err != nil {
				return
			}
			sctx, waited, stop = rctx, w, s
		}
		err := g.waitStatus(sctx, logr.Discard(), func(reason, message string) {
			c.report(ConditionFalse, reason, message)
		})
		if err == nil && g.cfg.Decode == nil {
			// As in WaitReady: a status read answered before the record
			// it waited on was lost is no proof for the next record, and
			// the record's watcher may not have ended sctx yet.
			if st, _ := g.record.Load(); !g.recordValid(st) || st.rev != waited.rev || sctx.Err() != nil {
				err = ErrRecordLost
			}
		}
		if err == nil {
			c.report(ConditionTrue, ReasonReleaseAdmitted, fmt.Sprintf("the status admits release %s", g.cfg.Version.Release))
			<-sctx.Done()
		}
		stop()
		if ctx.Err() != nil {
			return
		}
		lost = true
	}
}
