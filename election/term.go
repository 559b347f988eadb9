package election

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// term is the plumbing every backend's Leadership shares: the term context,
// its cancel cause, the token, the identity, and a release hook that runs at
// most once.
//
// A term ends in exactly one of three ways, and the first one wins:
//   - Resign: the context ends with cause ErrResigned, then the release hook
//     runs with the caller's context;
//   - lose: the backend saw leadership go (session or lease expired,
//     another holder); the context ends with a cause wrapping
//     ErrLeadershipLost and the release hook never runs;
//   - the parent context ends: the term context ends with the parent's
//     cause. Whether to release then is the backend's decision (see
//     releaseDetached); the term itself starts no goroutine.
//
// All methods are safe for concurrent use.
type term struct {
	ctx      context.Context
	cancel   context.CancelCauseFunc
	token    Token
	identity string

	mu       sync.Mutex
	release  func(context.Context) error // nil once run or abandoned
	released chan struct{}               // closed when the release hook returned or was abandoned
}

// newTerm starts a term under parent. release is called at most once, by the
// first Resign (or releaseDetached), after the term context has ended; it may
// be nil when there is nothing to release.
func newTerm(parent context.Context, identity string, token Token, release func(context.Context) error) *term {
	ctx, cancel := context.WithCancelCause(parent)
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
// ErrResigned (unless it already ended) and then runs the release hook, once.
// A later or concurrent Resign returns nil without waiting; so does a Resign
// after the term was lost.
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

// releasedCh is closed once the release hook has returned or was abandoned.
func (t *term) releasedCh() <-chan struct{} { return t.released }

// pendingRelease reports whether the release hook has neither run nor been
// abandoned yet.
func (t *term) pendingRelease() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.release != nil
}

// releaseDetached ends the term (keeping an earlier cause) and runs the
// release hook, if still pending, with a context detached from the term's
// cancellation and bounded by timeout. Backends call it when the parent
// context ended or the elector closes.
func (t *term) releaseDetached(timeout time.Duration) error {
	t.cancel(context.Canceled)
	ctx, cancel := context.WithTimeout(context.WithoutCancel(t.ctx), timeout)
	defer cancel()
	return t.runRelease(ctx)
}

func (t *term) runRelease(ctx context.Context) error {
	t.mu.Lock()
	release := t.release
	t.release = nil
	t.mu.Unlock()
	if release == nil {
		return nil
	}
	defer close(t.released)
	return release(ctx)
}

func (t *term) abandonRelease() {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.release != nil {
		t.release = nil
		close(t.released)
	}
}
