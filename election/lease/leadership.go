package lease

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/reconkit/reconkit/election"
	"github.com/reconkit/reconkit/internal/term"
)

// errValidityExpired is the reason of a loss by ValidUntil.
var errValidityExpired = errors.New("no successful renewal before ValidUntil")

// leadership is a term on a Lease, this backend's election.Leadership, as
// etcd's is its Leadership: the shared term Core plus the renewal loop, the
// validity watchdog and the release.
type leadership struct {
	core *term.Core
	e    *Elector

	// leading is the in-memory leader flag the write gate reads. It is
	// dropped before the term's release is sent (Pinniped's releaseLock)
	// and when the term is lost.
	leading atomic.Bool

	mu         sync.Mutex
	lease      *coordinationv1.Lease // as last written or read by this term; never modified
	key        clientGoKey           // client-go's view of the last record written
	base       time.Time             // start of the first write with the current key
	validUntil time.Time             // base + RenewDeadline

	begun   time.Time // start of the Campaign that won the term
	vacated time.Time // end of the previous holder's term as seen; zero if none

	extended chan struct{} // validity moved forward (buffered, 1)
	loopDone chan struct{} // renewal loop and watchdog exited
	exited   chan struct{} // every goroutine of the term exited, release included
}

var (
	_ election.Leadership = (*leadership)(nil)
	_ election.Expiring   = (*leadership)(nil)
)

// newLeadership makes the term for a Lease this candidate has just written as
// holder; start is the local instant the write was sent.
func newLeadership(e *Elector, lease *coordinationv1.Lease, start time.Time) *leadership {
	rec := recordFromLease(lease)
	return &leadership{
		e:          e,
		lease:      lease,
		key:        rec.clientGoKey(),
		base:       start,
		validUntil: start.Add(e.cfg.RenewDeadline),
		extended:   make(chan struct{}, 1),
		loopDone:   make(chan struct{}),
		exited:     make(chan struct{}),
	}
}

// start begins the term: it raises the leader flag and starts the renewal
// loop and the watchdog. wait is the Campaign's wait context: if it ended
// while the lease was taken, the term is released at once and an error
// returned, since no caller will ever hold it.
func (lt *leadership) start(wait context.Context) error {
	rec := recordFromLease(lt.lease)
	lt.core = term.New(wait, lt.e.cfg.Identity, rec.token(), lt.release)
	lt.leading.Store(true)
	lt.e.mu.Lock()
	lt.e.cur = lt
	lt.e.leading.Follow(lt.core.Context())
	lt.e.mu.Unlock()
	log := logr.FromContextOrDiscard(wait).WithValues("lease", lt.e.cfg.Namespace+"/"+lt.e.cfg.Name, "identity", lt.e.cfg.Identity, "token", lt.core.Token())
	now := lt.e.clock.Now()
	var handover time.Duration
	if !lt.vacated.IsZero() {
		handover = now.Sub(lt.vacated)
	}
	lt.e.report.Acquired(lt.core.Token(), now.Sub(lt.begun), handover)
	go func() {
		defer close(lt.exited)
		var wg sync.WaitGroup
		wg.Add(2)
		go func() { defer wg.Done(); lt.renewLoop(log) }()
		go func() { defer wg.Done(); lt.watchdog() }()
		wg.Wait()
		lt.e.report.Ended(lt.core.Token(), context.Cause(lt.core.Context()))
		close(lt.loopDone)
	}()
	if !lt.e.clock.Now().Before(lt.ValidUntil()) {
		// The acquisition took longer than RenewDeadline: never hand out a
		// term that is already invalid.
		lt.lose(errValidityExpired)
		<-lt.exited
		return fmt.Errorf("election: campaign: %w: acquisition outlasted RenewDeadline", election.ErrLeadershipLost)
	}
	if wait.Err() != nil {
		lt.leading.Store(false)
		if err := lt.core.ReleaseDetached(context.Cause(wait), lt.e.cfg.RenewDeadline); err != nil {
			log.Error(err, "releasing a lease taken as the campaign was cancelled")
		}
		<-lt.exited
		return fmt.Errorf("election: campaign: %w", wait.Err())
	}
	return nil
}

// Context implements election.Leadership.
func (lt *leadership) Context() context.Context { return lt.core.Context() }

// Token implements election.Leadership: the Lease's leaseTransitions at
// the acquisition, plus one.
func (lt *leadership) Token() election.Token { return lt.core.Token() }

// Identity implements election.Leadership.
func (lt *leadership) Identity() string { return lt.core.Identity() }

// Resign implements Leadership: the term context ends and the leader flag
// drops, the renewal loop stops, then holderIdentity is cleared (with
// leaseDurationSeconds 1, as client-go's ReleaseOnCancel writes) so that
// any follower, ours or client-go's, may take the lease at once. It waits
// for the term's goroutines to exit, or for ctx.
func (lt *leadership) Resign(ctx context.Context) error {
	lt.leading.Store(false)
	err := lt.core.Resign(ctx)
	select {
	case <-lt.exited:
	case <-ctx.Done():
		if err == nil {
			err = fmt.Errorf("election: resign: %w", ctx.Err())
		}
	}
	return err
}

// ValidUntil implements Expiring: the start of the last renewal a follower
// can tell apart from the one before, plus RenewDeadline (that is, plus
// LeaseDuration less a skew margin of LeaseDuration − RenewDeadline), on
// the local monotonic clock.
func (lt *leadership) ValidUntil() time.Time {
	lt.mu.Lock()
	defer lt.mu.Unlock()
	return lt.validUntil
}

// ValidNow implements term.Validator: whether the term may act now: flag set, context live,
// and the clock before ValidUntil.
func (lt *leadership) ValidNow() bool {
	return lt.leading.Load() && !lt.core.Ended() && lt.e.clock.Now().Before(lt.ValidUntil())
}

// lose drops the flag and ends the term as lost.
func (lt *leadership) lose(reason error) {
	lt.leading.Store(false)
	lt.core.Lose(reason)
}

// renewLoop renews the lease every RetryPeriod until the term ends; after
// a failed renewal it waits as renewRetryWait says.
func (lt *leadership) renewLoop(log logr.Logger) {
	ctx := lt.Context()
	t := lt.e.clock.NewTimer(lt.e.cfg.RetryPeriod)
	defer t.Stop()
	failed := 0 // renewals failed in a row
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
		start := lt.e.clock.Now()
		slack := lt.ValidUntil().Sub(start)
		err := lt.renew(ctx)
		if ctx.Err() == nil {
			lt.e.report.Renewed(lt.core.Token(), lt.e.clock.Since(start), slack, err)
		}
		next := lt.e.cfg.RetryPeriod
		if err != nil && ctx.Err() == nil {
			failed++
			next = renewRetryWait(failed, next, lt.ValidUntil().Sub(lt.e.clock.Now()), lt.e.rand.renew)
			log.V(1).Info("renewing the lease failed; retrying", "err", err, "validUntil", lt.ValidUntil(), "after", next)
		} else {
			failed = 0
		}
		t.Reset(next)
	}
}

// renew writes a new renewTime. On a conflict it reads the Lease: if this
// term still holds it (another write of ours landed, or a foreign field
// changed) it retries with the new resourceVersion, otherwise the term is
// lost.
func (lt *leadership) renew(ctx context.Context) error {
	for range 3 {
		start := lt.e.clock.Now()
		lt.mu.Lock()
		l := lt.lease.DeepCopy()
		lt.mu.Unlock()
		rec := recordFromLease(l)
		rec.RenewTime = start
		if lt.e.cfg.Coordinated == nil {
			// As client-go's uncoordinated renewals do: a preferred holder
			// that the election controller names after this write still
			// reaches us (its write makes this one conflict, and reread
			// yields to it); one left over from before never does.
			rec.PreferredHolder = ""
		}
		l.Spec = rec.spec()
		got, err := lt.e.leases.Update(ctx, l, metav1.UpdateOptions{})
		switch {
		case err == nil:
			lt.extend(got, start)
			lt.yieldIfPreempted(got)
			return nil
		case apierrors.IsConflict(err):
			if err := lt.reread(ctx); err != nil {
				return err
			}
			if !lt.leading.Load() {
				// reread yielded to a preferred holder: renewing now would
				// write over the election controller's choice.
				return nil
			}
		case apierrors.IsNotFound(err):
			lt.lose(errors.New("the Lease was deleted"))
			return err
		default:
			return err
		}
	}
	return errors.New("election: renewing the lease: repeated conflicts")
}

// reread reads the Lease after a conflict and adopts it if this term still
// holds it; otherwise it ends the term as lost.
func (lt *leadership) reread(ctx context.Context) error {
	cur, err := lt.e.leases.Get(ctx, lt.e.cfg.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		lt.lose(errors.New("the Lease was deleted"))
		return err
	}
	if err != nil {
		return err
	}
	lt.e.note(cur, cur.ResourceVersion)
	if !lt.owns(cur) {
		holder := recordFromLease(cur).Holder
		lt.lose(fmt.Errorf("the Lease is now held by %q", holder))
		return election.ErrLeadershipLost
	}
	lt.mu.Lock()
	lt.lease = cur
	lt.mu.Unlock()
	lt.yieldIfPreempted(cur)
	return nil
}

// errPreempted is the reason of a term that ended because the Lease names
// another preferred holder.
var errPreempted = errors.New("the Lease names another preferred holder (Coordinated Leader Election)")

// yieldIfPreempted ends the term when l names a preferred holder other than
// this candidate, as client-go's leader does when the apiserver's election
// controller marks the end of its term. Unlike a loss, the release stays
// pending: the holder's Resign, sent after its own work returned, clears
// holderIdentity so the preferred candidate takes over at once; without
// it the lease simply expires, since renewals stop.
func (lt *leadership) yieldIfPreempted(l *coordinationv1.Lease) {
	rec := recordFromLease(l)
	if rec.PreferredHolder == "" || rec.PreferredHolder == lt.core.Identity() {
		return
	}
	lt.leading.Store(false)
	lt.core.Yield(fmt.Errorf("%w: %q", errPreempted, rec.PreferredHolder))
}

// owns reports whether l still records this term: our identity as holder
// and the transition count of our acquisition.
func (lt *leadership) owns(l *coordinationv1.Lease) bool {
	rec := recordFromLease(l)
	return rec.Holder == lt.core.Identity() && rec.token() == lt.core.Token()
}

// extend records a successful renewal sent at start.
func (lt *leadership) extend(got *coordinationv1.Lease, start time.Time) {
	lt.e.note(got, got.ResourceVersion)
	key := recordFromLease(got).clientGoKey()
	lt.mu.Lock()
	lt.lease = got
	if key != lt.key {
		lt.key, lt.base = key, start
		lt.validUntil = start.Add(lt.e.cfg.RenewDeadline)
	}
	lt.mu.Unlock()
	select {
	case lt.extended <- struct{}{}:
	default:
	}
}

// watchdog ends the term as lost once ValidUntil passes, whether or not a
// renewal answer came back (a hung apiserver answers nothing).
func (lt *leadership) watchdog() {
	ctx := lt.Context()
	for {
		d := lt.ValidUntil().Sub(lt.e.clock.Now())
		if d <= 0 {
			lt.lose(errValidityExpired)
			return
		}
		t := lt.e.clock.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-lt.extended:
			t.Stop()
		case <-t.C():
		}
	}
}

// release is the term's release hook. It drops the leader flag first, so
// that nothing gated acts on a lease about to be given up, waits for the
// renewal loop to stop, then clears holderIdentity if the Lease still
// records this term.
func (lt *leadership) release(ctx context.Context) error {
	lt.leading.Store(false)
	select {
	case <-lt.loopDone:
	case <-ctx.Done():
		return fmt.Errorf("election: releasing the lease: %w", ctx.Err())
	}
	for range 3 {
		lt.mu.Lock()
		l := lt.lease.DeepCopy()
		lt.mu.Unlock()
		now := lt.e.clock.Now()
		rec := recordFromLease(l)
		rec.Holder, rec.DurationSeconds = "", 1
		rec.AcquireTime, rec.RenewTime = now, now
		l.Spec = rec.spec()
		got, err := lt.e.leases.Update(ctx, l, metav1.UpdateOptions{})
		switch {
		case err == nil:
			lt.e.note(got, got.ResourceVersion)
			return nil
		case apierrors.IsConflict(err):
			cur, gerr := lt.e.leases.Get(ctx, lt.e.cfg.Name, metav1.GetOptions{})
			if apierrors.IsNotFound(gerr) {
				return nil
			}
			if gerr != nil {
				return fmt.Errorf("election: releasing the lease: %w", gerr)
			}
			lt.e.note(cur, cur.ResourceVersion)
			if !lt.owns(cur) {
				return nil // somebody else holds it already
			}
			lt.mu.Lock()
			lt.lease = cur
			lt.mu.Unlock()
		case apierrors.IsNotFound(err):
			return nil
		default:
			return fmt.Errorf("election: releasing the lease: %w", err)
		}
	}
	return errors.New("election: releasing the lease: repeated conflicts")
}
