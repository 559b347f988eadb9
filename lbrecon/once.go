package lbrecon

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// One pass for hosts with their own requeue loop (ReconcileOnce,
// TeardownOnce) and the RequeueAfter it answers. Tests: once_test.go,
// requeue_test.go, spin_test.go, passbudget_test.go.

// Result is the outcome of one [Reconciler.ReconcileOnce] or
// [Reconciler.TeardownOnce] call.
type Result struct {
	// Converged is true when a listing confirmed the desired state (for
	// TeardownOnce: no owned object left): nothing to create, update or
	// destroy, nothing pending, no write unconfirmed.
	Converged bool
	// RequeueAfter is when to call again when not converged: the time after
	// which looking again is useful (growing while nothing changes).
	RequeueAfter time.Duration
	// Plan is what the call found to do, before doing it.
	Plan Plan
	// CurrentConverged is set by [Moving.ReconcileOnce] once the current
	// load balancer is converged (as Converged would say of it alone: its
	// address may be published), whatever the teardown of the earlier
	// IDs does; Converged waits for that teardown too. Other calls leave
	// it false.
	CurrentConverged bool
	// Confirming is set by TeardownOnce (and [Leftovers.TeardownOnce])
	// when the listing showed no owned object left and the teardown
	// waits only for a listing at a horizon to confirm it: the horizon
	// of each journaled destruction (ListLag after the listing that
	// first showed its object gone), or that of a [Leftovers]' making.
	// Nothing is sent in the meantime; RequeueAfter is the time left to
	// that horizon (at least PollInterval), so a host that waits it
	// and calls again gets Converged, unless that listing shows
	// something of the owner's again. While listings keep showing
	// nothing and the journal answers, convergence comes at most ListLag
	// plus (ListLagListings+1) PollIntervals after the first such
	// result. Other calls leave it false.
	Confirming bool
	// Transient holds the errors a wait may cure that the pass met: an
	// engine call that failed transiently, timed out or was rate limited.
	// They are not returned as the error: the next call, after
	// RequeueAfter, retries them. Nil when there were none.
	Transient error
}

// ReconcileOnce makes one pass and returns without waiting: it lists,
// makes the changes the listing allows, and reports whether the desired
// state is confirmed or when to call again. Everything a later call needs
// (unconfirmed writes, failure counts, pending times) stays in the
// Reconciler. It is the mode for hosts that run their own requeue loop
// (controller-runtime's RequeueAfter, cloud-provider's RetryError).
//
// It never waits on the clock: each engine call is made once, within
// CallTimeout, and the call takes one List plus at most one round of calls
// per phase (repair, adopt, destroy, create, update; calls inside a phase
// run in parallel, within Parallelism); a List that fails or times out
// ends it at once. The pass as a whole is bounded by CallTimeout: every
// engine and journal call ends by the time the pass has run for
// CallTimeout (a call still running then is cut short and counts as
// timed out: a creation's outcome is unknown and holds its name, as after
// a lost answer), and no call starts with less than a tenth of
// CallTimeout left (the calls left are made by the next call, and a
// creation not sent holds no name). One call thus returns within one
// CallTimeout, however the provider and the journal answer, provided
// they honour their context. A call that fails in a way a wait may cure
// (transient, timed out, rate limited) is not retried inside it: the
// failure is reported in Result.Transient and the host's next call, after
// RequeueAfter, is the retry (RetryBudget and CallAttempts do not apply).
// RequeueAfter then grows from RetryInterval, doubling to MaxPollInterval
// while passes keep meeting such failures, and is never below a
// provider's retry-after hint. A result that is not converged and carries
// no error always has a positive RequeueAfter, also when a deadline (a
// pending or confirmation timeout) passed during the pass.
//
// The error reports what cannot progress by waiting (ErrResourceFailed,
// ErrPendingTimeout, ErrNotDestroyable, ErrInconsistent, permanent engine
// errors); Result is meaningful alongside it.
func (r *Reconciler) ReconcileOnce(ctx context.Context) (Result, error) {
	return r.reconcileOnce(ctx, false)
}

// TeardownOnce is the non-blocking [Reconciler.Teardown]: one pass that
// destroys what the listing allows now (children before parents, each
// parent once a listing shows its children gone), and reports Converged
// once a listing shows no owned object left, or when to call again. It
// shares ReconcileOnce's memory and errors.
func (r *Reconciler) TeardownOnce(ctx context.Context) (Result, error) {
	return r.reconcileOnce(ctx, true)
}

func (r *Reconciler) reconcileOnce(ctx context.Context, down bool) (res Result, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	start := r.clock.Now()
	defer func() { r.metrics.Observe(verbOf(down), classify(err), r.clock.Since(start)) }()
	ctx = onePass(ctx, start)
	if err := r.beginTerm(ctx); err != nil {
		return r.requeueOr(ctx, err)
	}
	if err := r.loadJournal(ctx); err != nil {
		return r.requeueOr(ctx, err)
	}
	listed, listedAt, err := r.list(ctx)
	if err != nil {
		return r.requeueOr(ctx, err)
	}
	p, err := r.pass(ctx, listed, listedAt, down)
	if r.lagging(err, listedAt) {
		return Result{RequeueAfter: r.cfg.PollInterval, Transient: err}, nil
	}
	if err != nil {
		return Result{}, err
	}
	res.Plan = p.public()
	if p.converged() && down {
		if wait, failed := r.unsettled(); failed != nil {
			// The journal failed to forget confirmed destructions: a
			// failure a wait may cure, retried after a growing wait.
			return Result{RequeueAfter: max(wait, r.nextRetry(retryAfter(failed))), Plan: res.Plan,
				Transient: fmt.Errorf("lbrecon: forget confirmed destructions in the journal: %w", failed)}, nil
		} else if wait > 0 {
			// No owned object left; its destructions wait in the
			// journal for their confirmation.
			return Result{RequeueAfter: wait, Plan: res.Plan, Confirming: true}, nil
		}
	}
	if p.converged() {
		r.requeue, r.retry = 0, 0
		return Result{Converged: true, Plan: res.Plan}, nil
	}
	switch {
	case p.changed || r.requeue == 0:
		r.requeue = r.cfg.PollInterval
	default:
		r.requeue = min(time.Duration(float64(r.requeue)*pollMultiplier), r.cfg.MaxPollInterval)
	}
	res.RequeueAfter = r.requeue
	r.memMu.Lock()
	shownBy := r.mem.expectShown()
	newest, unconfirmed := r.mem.newestWrite(r.listings.Load(), r.cfg.ListLagListings > 0)
	r.memMu.Unlock()
	now := r.clock.Now()
	if !shownBy.IsZero() {
		res.RequeueAfter = max(res.RequeueAfter, shownBy.Sub(now))
	}
	if !p.changed && unconfirmed && shownBy.After(newest) && !now.Before(shownBy) {
		// Slower than learnt: look again after the write's age, as
		// Reconcile does.
		res.RequeueAfter = max(res.RequeueAfter, min(now.Sub(newest), r.cfg.MaxPollInterval))
	}
	if d, ok := p.deadlineAt(); ok {
		// A deadline that passed during the pass (engine calls take
		// time) is acted on by the next call, soon but not at once.
		res.RequeueAfter = min(res.RequeueAfter, max(d.Sub(now), min(r.cfg.RetryInterval, r.cfg.PollInterval)))
	}
	if len(p.retry) > 0 {
		res.Transient = errors.Join(p.retry...)
		res.RequeueAfter = max(res.RequeueAfter, r.nextRetry(p.hint))
	} else {
		r.retry = 0
	}
	return res, p.err()
}

// requeueOr answers a pass that could not start: a failure a wait may
// cure is a requeue after a growing wait (or the provider's hint), any
// other an error. Called with mu held.
func (r *Reconciler) requeueOr(ctx context.Context, err error) (Result, error) {
	if ctx.Err() != nil || !retryable(err) {
		return Result{}, err
	}
	return Result{RequeueAfter: r.nextRetry(retryAfter(err)), Transient: err}, nil
}

// nextRetry returns when to call again after a pass that met failures a
// wait may cure: RetryInterval, doubling over consecutive such passes up
// to MaxPollInterval, or the provider's retry-after hint when longer.
// Called with mu held.
func (r *Reconciler) nextRetry(hint time.Duration) time.Duration {
	if r.retry == 0 {
		r.retry = r.cfg.RetryInterval
	} else {
		r.retry = min(2*r.retry, r.cfg.MaxPollInterval)
	}
	return max(r.retry, hint)
}
