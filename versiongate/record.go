package versiongate

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-logr/logr"

	"github.com/reconkit/reconkit/backoff"
)

// cleanupTimeout bounds best-effort cleanup requests (revoke, resign) made
// after the gate's context ended.
const cleanupTimeout = 2 * time.Second

// recordState is what the gate knows of its own published record.
type recordState struct {
	// rev is the revision at which the record was published; 0 before.
	rev int64
	// valid is true while the record is known to exist: published, and the
	// local validity deadline not passed.
	valid bool
}

// recordMargin is how much earlier than the server could expire the
// record's lease the gate stops counting on it: a tenth of the TTL, at
// least 500ms, for a difference in clock rates and the latency of
// noticing.
func recordMargin(ttl time.Duration) time.Duration {
	return max(ttl/10, 500*time.Millisecond)
}

// leaseMargin is the margin of a published record: from the lease's
// duration as the store granted it (Granted, else TTL), which is what the
// store's judgement of expiry adds its own margin to, not from the TTL
// the gate asked for (TestMarginFromTheGrantedLease).
func leaseMargin(l RecordLease) time.Duration {
	if l.Granted > 0 {
		return recordMargin(l.Granted)
	}
	return recordMargin(l.TTL)
}

// publishRecord publishes the local node's record bound to a lease, only if
// no record for this node exists (a second process with the same NodeID
// never takes it over), keeps the lease alive until ctx ends, then deletes
// the record so it goes at once.
//
// It keeps a local validity deadline on RecordClock: the start of the last
// keep-alive the server acknowledged plus the TTL, less a margin. Each
// renewal also checks that the record is still bound to the lease. When the
// deadline passes without a successful renewal (a partition, a hung store),
// or the lease or record is gone, the record stops counting as valid at
// once (WaitReady fails, Ready reports false) and publishRecord returns an
// error wrapping ErrRecordLost, before the server can expire the record.
func (g *Gate) publishRecord(ctx context.Context) (err error) {
	log := logr.FromContextOrDiscard(ctx)
	st := g.cfg.Store
	rc := g.recordClock
	id := g.cfg.NodeID
	value, err := EncodeNodeRelease(id, g.cfg.Version)
	if err != nil {
		return err
	}
	ttl := g.cfg.RecordTTL
	var lease RecordLease
	var validUntil time.Time
	var margin time.Duration
	err = backoff.Retry(ctx, func(ctx context.Context) error {
		start := rc.Now()
		l, err := st.PublishRecord(ctx, id, value, ttl)
		if err != nil {
			return err
		}
		margin = leaseMargin(l)
		lease, validUntil = l, start.Add(l.TTL-margin)
		return nil
	}, backoff.WithClock(g.clock), backoff.WithRand(g.rand.record), backoff.WithName("versiongate: publish node record"))
	if err != nil {
		return err
	}
	// A clean stop deletes the record so it goes at once. A lost one is
	// not deleted: the lease is gone or unreachable, and a request through
	// a partition would only delay telling the host to stop serving.
	lost := false
	defer func() {
		if lost {
			g.event("Warning", ReasonRecordLost, fmt.Sprintf("Node %s must stop serving: %v", id, err))
			g.observe(Observation{Event: EventRecordLost, Err: err})
			return
		}
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		defer cancel()
		if derr := st.DeleteRecord(dctx, lease); derr != nil {
			log.V(1).Info("Could not delete the node record; it will expire", "lease", fmt.Sprintf("%x", lease.Lease), "err", derr.Error())
		}
	}()
	log.Info("Published node record", "id", id, "release", g.cfg.Version.Release.String(), "lease", fmt.Sprintf("%x", lease.Lease))
	if !rc.Now().Before(validUntil) {
		lost = true
		return fmt.Errorf("%w: publishing %q outlasted the record's TTL less the margin", ErrRecordLost, id)
	}
	until := validUntil // a copy: the loop below moves validUntil on
	g.validUntil.Store(&until)
	g.record.Set(recordState{rev: lease.Revision, valid: true})
	defer g.setRecordInvalid()

	interval := ttl / 3
	retryBase := min(renewRetryBase, interval)
	next := interval
	failed := 0 // renewals failed in a row
	for {
		wait := min(next, validUntil.Sub(rc.Now()))
		t := rc.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C():
		}
		start := rc.Now()
		if !start.Before(validUntil) {
			lost = true
			g.setRecordInvalid()
			return fmt.Errorf("%w: no keep-alive of lease %x acknowledged before its local deadline (TTL %v less %v)", ErrRecordLost, lease.Lease, ttl, margin)
		}
		// Bound the renewal by the validity left, on the real clock the
		// request's deadline is measured on.
		rctx, cancel := context.WithTimeout(ctx, validUntil.Sub(start))
		got, err := st.KeepAlive(rctx, lease)
		cancel()
		switch {
		case err == nil:
			validUntil = start.Add(got - margin)
			until := validUntil
			g.validUntil.Store(&until)
			next, failed = interval, 0
			g.observe(Observation{Event: EventKeepAlive, Latency: rc.Since(start), ValidFor: validUntil.Sub(rc.Now())})
		case errors.Is(err, ErrRecordLost):
			lost = true
			g.setRecordInvalid()
			return fmt.Errorf("%q: %w", id, err)
		case ctx.Err() != nil:
			return nil
		default:
			log.V(1).Info("Renewing the node record failed; retrying", "err", err.Error(), "validFor", validUntil.Sub(rc.Now()).String())
			failed++
			next = renewRetryPause(failed, retryBase, interval, validUntil.Sub(rc.Now()), margin, g.rand.record)
		}
	}
}

// Retries of a failed renewal of the node record. The n-th failure in a
// row is followed by a pause of renewRetryBase (the renewal interval,
// RecordTTL/3, if that is shorter) doubled n-1 times, at most the renewal
// interval, plus up to renewRetryJitter of it at random, so that nodes
// whose renewals one outage failed together retry apart. From 30 s of
// failures on the pauses are over a second, within the budget of one
// request a second (BUDGETS.md); a fixed 500 ms pace cost 2 requests a
// second for as long as the validity lasted, beyond 30 s with records of
// over 33 s (TestRenewalRetriesBackOffUnderPersistentErrors).
const (
	renewRetryBase   = 500 * time.Millisecond
	renewRetryJitter = 0.5
)

// renewRetryPause is the pause after the n-th failed renewal in a row,
// when left is the validity left and reserve the time the last try should
// have to complete before the local deadline (the record's margin).
//
// A pause that would start the next try later than left-reserve is
// shortened to start it before then, drawn at random from the last third
// of the time to that instant, so that the last try is not needlessly late
// and nodes do not make it together. A shortened pause is never below
// base, nor below the unjittered pause or a second, whichever is less, so
// that tries never crowd towards the deadline. When no such try fits, the
// pause is left: the loop waits for the deadline, where the record is lost
// whatever the retries did.
func renewRetryPause(n int, base, limit, left, reserve time.Duration, r func() float64) time.Duration {
	p := backoff.Renewal{
		Initial:         base,
		Multiplier:      2,
		Max:             limit,
		Jitter:          renewRetryJitter,
		Reserve:         reserve,
		MinShortened:    1,
		MinShortenedCap: time.Second,
		Rand:            r,
	}.Pause(n, left)
	return min(p, max(left, 0)) // when no try fits, wait for the deadline itself
}

// setRecordInvalid marks the local record as not (or no longer) valid.
func (g *Gate) setRecordInvalid() {
	if st, ok := g.record.Load(); !ok || st.valid {
		g.record.Set(recordState{rev: st.rev})
	}
	g.ready.Store(false)
}
