package term

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/reconkit/reconkit/election"
)

// Core is the part of a term every backend's Leadership shares: the term
// context, its cancel cause, the token, the identity, and a release hook.
//
// A term ends in exactly one of three ways, and the first one wins:
//   - Resign: the context ends with cause election.ErrResigned, then the release hook
//     runs with the caller's context;
//   - lose: the backend saw leadership go (session or lease expired,
//     another holder); the context ends with a cause wrapping
//     election.ErrLeadershipLost and the release hook never runs;
//   - Close of the elector (Close): the context ends with
//     election.ErrClosed and the release hook stays pending for the
//     holder's Resign, sent after its own work returned, so that an
//     elector's Close never releases a term behind its holder's back.
//
// The term is not a child of the Campaign context: that context bounds only
// the wait, as etcd's concurrency.Election does, so that a caller decides
// when leadership is released, strictly after its own leader work returned.
//
// The release hook runs at most once at a time. Every caller of Resign
// waits for a release in flight and gets its result; a release that failed
// can be retried by the next Resign; one that succeeded is not repeated.
//
// All methods are safe for concurrent use.
type Core struct {
	ctx      context.Context
	cancel   context.CancelCauseFunc
	token    election.Token
	identity string

	mu        sync.Mutex
	release   func(context.Context) error // nil once it succeeded or was abandoned
	releasing chan struct{}               // non-nil while a release runs; closed when it returns
	lastErr   error                       // result of the last release attempt
	released  chan struct{}               // closed when the release succeeded or was abandoned
}

// New starts the Core of a new term. parent's values (a logger) are kept, its
// cancellation is not: the term ends only through Resign, lose or the
// backend's Close. release is run by Resign (or releaseDetached) after the
// term context has ended; it may be nil when there is nothing to release.
func New(parent context.Context, identity string, token election.Token, release func(context.Context) error) *Core {
	ctx, cancel := context.WithCancelCause(context.WithoutCancel(parent))
	if release == nil {
		release = func(context.Context) error { return nil }
	}
	return &Core{
		ctx:      ctx,
		cancel:   cancel,
		token:    token,
		identity: identity,
		release:  release,
		released: make(chan struct{}),
	}
}

// Context implements election.Leadership.
func (t *Core) Context() context.Context { return t.ctx }

// Token implements election.Leadership.
func (t *Core) Token() election.Token { return t.token }

// Identity implements election.Leadership.
func (t *Core) Identity() string { return t.identity }

// Resign implements election.Leadership: it ends the term context with cause
// election.ErrResigned (unless it already ended) and then runs the release hook. It
// returns only once the release completed: a concurrent Resign waits for
// the one in flight and returns its result, a Resign after a failed release
// tries again, and one after a successful release, or after the term was
// lost, returns nil.
func (t *Core) Resign(ctx context.Context) error {
	t.cancel(election.ErrResigned)
	return t.runRelease(ctx)
}

// Lose ends the term with a cause wrapping election.ErrLeadershipLost (reason may be
// nil) and abandons the release hook: what was lost cannot be released.
// It reports whether this call ended the term.
func (t *Core) Lose(reason error) bool {
	if t.ctx.Err() != nil {
		return false
	}
	cause := election.ErrLeadershipLost
	if reason != nil {
		cause = fmt.Errorf("%w: %w", election.ErrLeadershipLost, reason)
	}
	t.cancel(cause)
	ended := context.Cause(t.ctx) == cause
	if ended {
		t.abandonRelease()
	}
	return ended
}

// Yield ends the term with a cause wrapping ErrLeadershipLost and reason,
// as Lose does, but keeps the release hook pending: the holder's Resign,
// sent after its own work returned, still releases leadership. A Lease
// holder preempted by Coordinated Leader Election yields this way.
func (t *Core) Yield(reason error) {
	t.cancel(fmt.Errorf("%w: %w", election.ErrLeadershipLost, reason))
}

// Close ends the term with cause election.ErrClosed (keeping an earlier
// cause) and keeps the release hook pending: the holder's Resign, sent
// after its own work returned, still releases leadership. An elector's
// Close calls it for a term a holder may still be acting on.
func (t *Core) Close() {
	t.cancel(election.ErrClosed)
}

// Ended reports whether the term context has ended.
func (t *Core) Ended() bool { return t.ctx.Err() != nil }

// Done is closed when the term context ends.
func (t *Core) Done() <-chan struct{} { return t.ctx.Done() }

// Released is closed once the release hook has succeeded or was
// abandoned.
func (t *Core) Released() <-chan struct{} { return t.released }

// PendingRelease reports whether the release hook has neither succeeded
// nor been abandoned yet.
func (t *Core) PendingRelease() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.release != nil
}

// ReleaseDetached ends the term with cause (keeping an earlier cause) and
// runs the release hook, if still pending, with a context detached from the
// term's cancellation and bounded by timeout. It is for a term nobody
// holds: one won as its Campaign was cancelled or its elector closed.
func (t *Core) ReleaseDetached(cause error, timeout time.Duration) error {
	t.cancel(cause)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(t.ctx), timeout)
	defer cancel()
	return t.runRelease(ctx)
}

// runRelease runs the release hook unless it already succeeded or was
// abandoned; if another call runs it, it waits for that one (or ctx) and
// returns its result.
func (t *Core) runRelease(ctx context.Context) error {
	for {
		t.mu.Lock()
		if t.release == nil {
			t.mu.Unlock()
			return nil
		}
		if ch := t.releasing; ch != nil {
			t.mu.Unlock()
			select {
			case <-ch:
			case <-ctx.Done():
				return fmt.Errorf("election: release: %w", ctx.Err())
			}
			t.mu.Lock()
			err := t.lastErr
			t.mu.Unlock()
			if err != nil {
				return err
			}
			continue
		}
		release := t.release
		ch := make(chan struct{})
		t.releasing = ch
		t.mu.Unlock()

		err := release(ctx)

		t.mu.Lock()
		t.lastErr = err
		t.releasing = nil
		if err == nil && t.release != nil {
			t.release = nil
			close(t.released)
		}
		t.mu.Unlock()
		close(ch)
		return err
	}
}

func (t *Core) abandonRelease() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.release != nil && t.releasing == nil {
		t.release = nil
		close(t.released)
	}
}
