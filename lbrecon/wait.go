package lbrecon

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/reconkit/reconkit/backoff"
)

// pollMultiplier is the growth of the wait between polls. It is low on
// purpose: a poll is one List for many objects, and a wait that overshoots the
// provider's pending period adds to every creation wave.
const pollMultiplier = 1.3

// wait polls, on the clock, until looking again is useful: a listing gives a
// plan with something to do, the desired state is confirmed, or the
// earliest deadline of what is waited for (a pending timeout, a write's
// confirmation timeout) has come. The first poll comes one PollInterval
// after the call. It returns the last listing, and fresh, when the last
// poll was a List, for the next pass to use.
func (r *Reconciler) wait(ctx context.Context, p *plan, down bool) (listed []Object, listedAt listing, fresh bool, err error) {
	timeout := r.cfg.PendingTimeout
	if d, ok := p.deadlineAt(); ok {
		timeout = max(d.Sub(r.clock.Now()), r.cfg.PollInterval)
	}
	// Do not poll before the outstanding writes can show: earlier writes
	// tell how long the provider takes.
	var early time.Duration
	if p.changed {
		r.memMu.Lock()
		if shownBy := r.mem.expectShown(); !shownBy.IsZero() {
			early = shownBy.Sub(r.clock.Now()) - r.cfg.PollInterval
		}
		r.memMu.Unlock()
	}
	if early > 0 {
		early = min(early, timeout)
		t := r.clock.NewTimer(early)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, listing{}, false, fmt.Errorf("lbrecon: wait for pending and unconfirmed objects: %w", ctx.Err())
		case <-t.C():
		}
		timeout = max(timeout-early, r.cfg.PollInterval)
	}
	// A few pending objects that listings already show are polled with
	// one Get each; everything else with one List.
	var gets []Object
	if len(p.Unconfirmed) == 0 && len(p.Pending) <= r.cfg.GetPollMax && !p.changed {
		gets = p.Pending
	}
	// After a listing that still lacks an outstanding write although the
	// time earlier writes took has passed, the next one comes no sooner
	// than that write's age again: a List costs 1 + N requests, and a
	// provider slower than learnt (a first asynchronous deletion after
	// creations, say) is found in a number of polls that grows with the
	// logarithm of the error, not linearly. Before anything is learnt, the
	// polls grow gently from PollInterval.
	end := r.clock.Now().Add(timeout)
	var notBefore time.Time
	cond := func(ctx context.Context) (bool, error) {
		listed, fresh = nil, false
		if notBefore.After(end) {
			notBefore = end
		}
		if d := notBefore.Sub(r.clock.Now()); d > 0 {
			t := r.clock.NewTimer(d)
			select {
			case <-ctx.Done():
				t.Stop()
				return false, ctx.Err()
			case <-t.C():
			}
		}
		if len(gets) > 0 {
			got, errs := r.parallelOnce(ctx, gets, VerbGet, r.cfg.Engine.Get)
			for i, e := range errs {
				switch {
				case errors.Is(e, ErrNotFound):
				case e != nil:
					return false, e
				case got[i].State != StateOK && got[i].State != StateFailed:
					return false, nil
				}
			}
			return true, nil
		}
		var objs []Object
		var at listing
		if err := r.once(ctx, VerbList, func(ctx context.Context) error {
			var err error
			objs, at, err = r.engineList(ctx)
			return err
		}); err != nil {
			return false, err
		}
		next, err := r.planFor(ctx, objs, at, down)
		if r.lagging(err, at) {
			return false, nil // a replica showed a child before its parent: look again
		}
		if err != nil {
			return false, backoff.Permanent(err)
		}
		listed, listedAt, fresh = objs, at, true
		work := len(next.Create)+len(next.Update)+len(next.Destroy)+len(next.Adopt)+len(next.repair) > 0
		done := work || next.converged() || len(next.waiting) == 0
		if !done {
			r.memMu.Lock()
			at, ok := r.mem.newestWrite(r.listings.Load(), r.cfg.ListLagListings > 0)
			shownBy := r.mem.expectShown()
			r.memMu.Unlock()
			if now := r.clock.Now(); ok && shownBy.After(at) && !now.Before(shownBy) {
				notBefore = now.Add(min(now.Sub(at), r.cfg.MaxPollInterval))
			}
		}
		return done, nil
	}
	err = backoff.Poll(ctx, r.cfg.PollInterval, timeout, cond,
		backoff.WithDelayedStart(),
		backoff.WithClock(r.clock),
		backoff.WithMaxInterval(r.cfg.MaxPollInterval),
		backoff.WithMultiplier(pollMultiplier),
		backoff.WithName("lbrecon: wait for pending and unconfirmed objects"),
	)
	switch {
	case err == nil:
		return listed, listedAt, fresh, nil
	case ctx.Err() != nil:
		return nil, listing{}, false, fmt.Errorf("lbrecon: wait for pending and unconfirmed objects: %w", ctx.Err())
	case errors.Is(err, backoff.ErrGaveUp):
		// A deadline came: the next pass reports what is stuck.
		return nil, listing{}, false, nil
	case errors.Is(err, ErrInconsistent):
		return nil, listing{}, false, err
	}
	return nil, listing{}, false, fmt.Errorf("lbrecon: wait for pending and unconfirmed objects: %w", err)
}
