package ccm

import (
	"context"
	"time"

	"github.com/reconkit/reconkit/lbrecon"
)

// How long one EnsureLoadBalancerDeleted call goes on: one teardown pass
// per load balancer by default, plus the wait for the confirmation of
// destructions it already sent; more passes with a positive TeardownWait.
// Tests: delete_test.go, confirm_test.go.

// pace says how long one EnsureLoadBalancerDeleted call may go on making
// teardown passes (see passes). The zero pace (or nil) makes one pass.
type pace struct {
	// deadline, when set (Config.TeardownWait positive), is the time by
	// which the call's passes end, whatever they wait for.
	deadline time.Time
	// confirmUntil, when set, is the time by which a wait for a
	// confirmation ends (the call's start plus Reconciler.CallTimeout),
	// and confirmLeft what the call may still spend waiting for
	// confirmations in all.
	confirmUntil time.Time
	confirmLeft  time.Duration
}

// deletePace returns the pace of an EnsureLoadBalancerDeleted call that
// starts now: with a positive TeardownWait, passes until then; unless
// TeardownWait is negative, the wait for confirmations, at most the
// provider's declared lag plus (ListLagListings+1) PollIntervals, and
// never past one CallTimeout from now.
func (b *Balancer) deletePace(now time.Time) *pace {
	var p pace
	if b.cfg.TeardownWait > 0 {
		p.deadline = now.Add(b.cfg.TeardownWait)
	}
	if b.cfg.TeardownWait >= 0 {
		p.confirmUntil, p.confirmLeft = now.Add(b.callTimeout()), b.confirmBound()
	}
	return &p
}

// confirmBound returns the longest a teardown may wait for confirmation
// once a listing showed nothing of its objects (lbrecon.Result.Confirming):
// the list lag, configured or declared by the engine, plus
// (ListLagListings+1) PollIntervals.
func (b *Balancer) confirmBound() time.Duration {
	rc := b.cfg.Reconciler
	lag, listings, poll := rc.ListLag, rc.ListLagListings, rc.PollInterval
	if ll, ok := b.cfg.Engine.(lbrecon.ListLagger); ok && lag == 0 {
		lag = ll.ListLag()
	}
	if ll, ok := b.cfg.Engine.(lbrecon.ListingLagger); ok && listings == 0 {
		listings = ll.ListLagListings()
	}
	if poll <= 0 {
		poll = lbrecon.DefaultPollInterval
	}
	return max(lag, 0) + time.Duration(max(listings, 0)+1)*poll
}

// callTimeout is the reconcilers' CallTimeout.
func (b *Balancer) callTimeout() time.Duration {
	if t := b.cfg.Reconciler.CallTimeout; t > 0 {
		return t
	}
	return lbrecon.DefaultCallTimeout
}

// confirms reports whether the call may wait wait for a confirmation and
// then make a pass that may take as long as the last one took, and if
// so, counts the wait.
func (p *pace) confirms(ctx context.Context, now time.Time, wait, took time.Duration) bool {
	if p == nil || p.confirmUntil.IsZero() || wait > p.confirmLeft || now.Add(wait+took).After(p.confirmUntil) {
		return false
	}
	if d, ok := ctx.Deadline(); ok && time.Until(d) < wait+took {
		return false
	}
	p.confirmLeft -= wait
	return true
}

// passes makes one teardown pass, then more as pace allows, waiting on
// the clock between them:
//   - while the teardown waits only for the confirmation of what it
//     destroyed (lbrecon.Result.Confirming: a listing showed nothing left
//     and the next listing at the horizon confirms it), when the wait and
//     a pass as long as the last fit within what the call may spend on
//     confirmations, before one CallTimeout from its start and before the
//     context's deadline (see deletePace);
//   - with a pace's deadline (TeardownWait), while the teardown is only
//     waiting for the provider and the wait fits before the deadline: the
//     pass met no failure a wait may cure, it has objects to destroy or
//     deletions to see, and waiting its RequeueAfter, then running as long
//     as it did, ends before the deadline.
//
// It stops at once at an error, at a failure a wait may cure (the
// service controller's backoff is that wait) and once converged.
//
// The service controller wraps EnsureLoadBalancerDeleted's error with %v,
// so it backs a RetryError off exponentially (5 s, 10 s, 20 s, ...): a
// teardown that needs several passes (children, then parents, each once a
// listing shows their children gone) costs far less time done here, and
// one more call for the confirmation alone would cost the next doubling.
func (b *Balancer) passes(ctx context.Context, pace *pace, once func(context.Context) (lbrecon.Result, error)) (lbrecon.Result, error) {
	clk := b.clock()
	for {
		start := clk.Now()
		res, err := once(ctx)
		if err != nil || res.Converged || res.Transient != nil {
			return res, err
		}
		took := clk.Since(start)
		if !res.Confirming || !pace.confirms(ctx, clk.Now(), res.RequeueAfter, took) {
			if pace == nil || pace.deadline.IsZero() {
				return res, nil
			}
			p := res.Plan
			if len(p.Destroy)+len(p.Deferred)+len(p.Pending)+len(p.Unconfirmed) == 0 && !p.Empty() {
				return res, nil // failed objects, nothing a wait here cures
			}
			// An empty plan not converged waits for a listing the list
			// lag later: a wait cures that.
			if clk.Now().Add(res.RequeueAfter + took).After(pace.deadline) {
				return res, nil
			}
		}
		t := clk.NewTimer(res.RequeueAfter)
		select {
		case <-ctx.Done():
			t.Stop()
			return res, nil // the RetryError of the last pass
		case <-t.C():
		}
	}
}
