package election

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
)

func TestTermResignEndsContextBeforeRelease(t *testing.T) {
	var calls atomic.Int32
	var tm *term
	tm = newTerm(context.Background(), "a", 7, func(context.Context) error {
		calls.Add(1)
		require.Error(t, tm.Context().Err(), "release ran before the term context ended")
		return nil
	})
	require.Equal(t, Token(7), tm.Token())
	require.Equal(t, "a", tm.Identity())
	require.NoError(t, tm.Context().Err())

	require.NoError(t, tm.Resign(context.Background()))
	require.ErrorIs(t, context.Cause(tm.Context()), ErrResigned)
	require.NoError(t, tm.Resign(context.Background()), "second Resign")
	require.Equal(t, int32(1), calls.Load())
	<-tm.releasedCh()
}

func TestTermResignReturnsReleaseErrorAndRetries(t *testing.T) {
	boom := errors.New("boom")
	var calls atomic.Int32
	tm := newTerm(context.Background(), "a", 1, func(context.Context) error {
		if calls.Add(1) == 1 {
			return boom
		}
		return nil
	})
	require.ErrorIs(t, tm.Resign(context.Background()), boom)
	require.True(t, tm.pendingRelease(), "a failed release must stay pending so it can be retried")
	require.NoError(t, tm.Resign(context.Background()), "retried Resign")
	require.Equal(t, int32(2), calls.Load(), "the retry must run the release again")
	require.NoError(t, tm.Resign(context.Background()), "Resign after a completed release")
	require.Equal(t, int32(2), calls.Load(), "a completed release is not repeated")
	<-tm.releasedCh()
}

// A Resign that finds a release in flight (Close, or another Resign) waits
// for it and returns its result: it never reports success before the
// release completed, and never hides its error.
func TestTermConcurrentResignWaitsForReleaseInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		boom := errors.New("revoke failed")
		var calls atomic.Int32
		finish := make(chan struct{})
		tm := newTerm(context.Background(), "a", 1, func(context.Context) error {
			calls.Add(1)
			<-finish
			return boom
		})
		first := make(chan error, 1)
		go func() { first <- tm.releaseDetached(ErrClosed, time.Minute) }()
		synctest.Wait() // the release is in flight
		second := make(chan error, 1)
		go func() { second <- tm.Resign(context.Background()) }()
		synctest.Wait() // the Resign has returned or waits
		select {
		case err := <-second:
			require.FailNow(t, "Resign returned while the release was in flight", "err %v", err)
		default:
		}
		close(finish)
		require.ErrorIs(t, <-first, boom)
		require.ErrorIs(t, <-second, boom, "the waiting Resign must return the release's error")
		require.Equal(t, int32(1), calls.Load())
	})
}

func TestTermResignWaitBoundedByContext(t *testing.T) {
	entered, finish := make(chan struct{}), make(chan struct{})
	tm := newTerm(context.Background(), "a", 1, func(context.Context) error {
		close(entered)
		<-finish
		return nil
	})
	done := make(chan error, 1)
	go func() { done <- tm.Resign(context.Background()) }()
	<-entered
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	require.ErrorIs(t, tm.Resign(ctx), context.Canceled)
	close(finish)
	require.NoError(t, <-done)
}

func TestTermLoseAbandonsRelease(t *testing.T) {
	var calls atomic.Int32
	tm := newTerm(context.Background(), "a", 1, func(context.Context) error { calls.Add(1); return nil })
	reason := errors.New("session expired")
	require.True(t, tm.lose(reason))
	require.False(t, tm.lose(nil), "second lose")
	cause := context.Cause(tm.Context())
	require.ErrorIs(t, cause, ErrLeadershipLost)
	require.ErrorIs(t, cause, reason)
	require.NoError(t, tm.Resign(context.Background()))
	require.NoError(t, tm.releaseDetached(ErrClosed, time.Second))
	require.Zero(t, calls.Load())
	<-tm.releasedCh()
}

// The term keeps its parent's values but not its cancellation: the
// Campaign context bounds only the wait.
func TestTermOutlivesParent(t *testing.T) {
	type key struct{}
	parent, cancel := context.WithCancelCause(context.WithValue(context.Background(), key{}, "v"))
	var calls atomic.Int32
	tm := newTerm(parent, "a", 1, func(ctx context.Context) error {
		calls.Add(1)
		require.NoError(t, ctx.Err(), "release context must be detached from the term")
		return nil
	})
	cancel(errors.New("campaign ended"))
	require.NoError(t, tm.Context().Err(), "the term ended with its parent")
	require.Equal(t, "v", tm.Context().Value(key{}))
	require.True(t, tm.pendingRelease())
	require.NoError(t, tm.releaseDetached(ErrClosed, time.Second))
	require.Equal(t, int32(1), calls.Load())
	require.ErrorIs(t, context.Cause(tm.Context()), ErrClosed)
}

func TestTermResignAfterLoseKeepsLossCause(t *testing.T) {
	tm := newTerm(context.Background(), "a", 1, nil)
	tm.lose(nil)
	require.NoError(t, tm.Resign(context.Background()))
	require.ErrorIs(t, context.Cause(tm.Context()), ErrLeadershipLost)
}

func TestDefaultIdentityUnique(t *testing.T) {
	a, b := DefaultIdentity(), DefaultIdentity()
	require.NotEqual(t, a, b)
	i := strings.LastIndexByte(a, '_')
	require.Positive(t, i)
	require.Len(t, a[i+1:], 16)
}
