package election

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// term is the plumbing every backend's Leadership shares: the term context,
// its cancel cause, the token, the identity, and a release hook.
//
// A term ends in exactly one of three ways, and the first one wins:
//   - Resign: the context ends with cause ErrResigned, then the release hook
//     runs with the caller's context;
//   - lose: the backend saw leadership go (session or lease expired,
//     another holder); the context ends with a cause wrapping
//     ErrLeadershipLost and the release hook never runs;
//   - Close of the elector: the context ends with ErrClosed and the
//     elector runs the release hook (releaseDetached).
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
type term struct {
	ctx      context.Context
	cancel   context.CancelCauseFunc
	token    Token
	identity string

	mu        sync.Mutex
	release   func(context.Context) error // nil once it succeeded or was abandoned
	releasing chan struct{}               // non-nil while a release runs; closed when it returns
	lastErr   error                       // result of the last release attempt
	released  chan struct{}               // closed when the release succeeded or was abandoned
}

// newTerm starts a term. parent's values (a logger) are kept, its
// cancellation is not: the term ends only through Resign, lose or the
// backend's Close. release is run by Resign (or releaseDetached) after the
// term context has ended; it may be nil when there is nothing to release.
func newTerm(parent context.Context, identity string, token Token, release func(context.Context) error) *term {
	ctx, cancel := context.WithCancelCause(context.WithoutCancel(parent))
	if release == nil {
		release = func(context.Context) error { return nil }
	}
	return &term{
		ctx:      ctx,
		cancel:   cancel,
		token:    token,
		identity: identity,
		release:  release,
		released: make(chan struct{}),
	}
}

// Context implements Leadership.
func (t *term) Context() context.Context { return t.ctx }

// Token implements Leadership.
func (t *term) Token() Token { return t.token }

// Identity implements Leadership.
func (t *term) Identity() string { return t.identity }

// Resign implements Leadership: it ends the term context with cause
// ErrResigned (unless it already ended) and then runs the release hook. It
// returns only once the release completed: a concurrent Resign waits for
// the one in flight and returns its result, a Resign after a failed release
// tries again, and one after a successful release, or after the term was
// lost, returns nil.
func (t *term) Resign(ctx context.Context) error {
	t.cancel(ErrResigned)
	return t.runRelease(ctx)
}

// lose ends the term with a cause wrapping ErrLeadershipLost (reason may be
// nil) and abandons the release hook: what was lost cannot be released.
// It reports whether this call ended the term.
func (t *term) lose(reason error) bool {
	if t.ctx.Err() != nil {
		return false
	}
	cause := ErrLeadershipLost
	if reason != nil {
		cause = fmt.Errorf("%w: %w", ErrLeadershipLost, reason)
	}
	t.cancel(cause)
	ended := context.Cause(t.ctx) == cause
	if ended {
		t.abandonRelease()
	}
	return ended
}

// ended reports whether the term context has ended.
func (t *term) ended() bool { return t.ctx.Err() != nil }

// done is closed when the term context ends.
func (t *term) done() <-chan struct{} { return t.ctx.Done() }

// releasedCh is closed once the release hook has succeeded or was
// abandoned.
func (t *term) releasedCh() <-chan struct{} { return t.released }

// pendingRelease reports whether the release hook has neither succeeded
// nor been abandoned yet.
func (t *term) pendingRelease() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.release != nil
}

// releaseDetached ends the term with cause (keeping an earlier cause) and
// runs the release hook, if still pending, with a context detached from the
// term's cancellation and bounded by timeout. Close calls it.
func (t *term) releaseDetached(cause error, timeout time.Duration) error {
	t.cancel(cause)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(t.ctx), timeout)
	defer cancel()
	return t.runRelease(ctx)
}

// runRelease runs the release hook unless it already succeeded or was
// abandoned; if another call runs it, it waits for that one (or ctx) and
// returns its result.
func (t *term) runRelease(ctx context.Context) error {
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

func (t *term) abandonRelease() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.release != nil && t.releasing == nil {
		t.release = nil
		close(t.released)
	}
}
