package term

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconkit/reconkit/election"
)

func TestTermResignEndsContextBeforeRelease(t *testing.T) {
	var calls atomic.Int32
	var tm *Core
	tm = New(context.Background(), "a", 7, func(context.Context) error {
		calls.Add(1)
		require.Error(t, tm.Context().Err(), "release ran before the term context ended")
		return nil
	})
	require.Equal(t, election.Token(7), tm.Token())
	require.Equal(t, "a", tm.Identity())
	require.NoError(t, tm.Context().Err())

	require.NoError(t, tm.Resign(context.Background()))
	require.ErrorIs(t, context.Cause(tm.Context()), election.ErrResigned)
	require.NoError(t, tm.Resign(context.Background()), "second Resign")
	require.Equal(t, int32(1), calls.Load())
	<-tm.Released()
}

func TestTermResignReturnsReleaseErrorAndRetries(t *testing.T) {
	boom := errors.New("boom")
	var calls atomic.Int32
	tm := New(context.Background(), "a", 1, func(context.Context) error {
		if calls.Add(1) == 1 {
			return boom
		}
		return nil
	})
	require.ErrorIs(t, tm.Resign(context.Background()), boom)
	require.True(t, tm.PendingRelease(), "a failed release must stay pending so it can be retried")
	require.NoError(t, tm.Resign(context.Background()), "retried Resign")
	require.Equal(t, int32(2), calls.Load(), "the retry must run the release again")
	require.NoError(t, tm.Resign(context.Background()), "Resign after a completed release")
	require.Equal(t, int32(2), calls.Load(), "a completed release is not repeated")
	<-tm.Released()
}

// A Resign that finds a release in flight (Close, or another Resign) waits
// for it and returns its result: it never reports success before the
// release completed, and never hides its error.
func TestTermConcurrentResignWaitsForReleaseInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		boom := errors.New("revoke failed")
		var calls atomic.Int32
		finish := make(chan struct{})
		tm := New(context.Background(), "a", 1, func(context.Context) error {
			calls.Add(1)
			<-finish
			return boom
		})
		first := make(chan error, 1)
		go func() { first <- tm.ReleaseDetached(election.ErrClosed, time.Minute) }()
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
	tm := New(context.Background(), "a", 1, func(context.Context) error {
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
	tm := New(context.Background(), "a", 1, func(context.Context) error { calls.Add(1); return nil })
	reason := errors.New("session expired")
	require.True(t, tm.Lose(reason))
	require.False(t, tm.Lose(nil), "second lose")
	cause := context.Cause(tm.Context())
	require.ErrorIs(t, cause, election.ErrLeadershipLost)
	require.ErrorIs(t, cause, reason)
	require.NoError(t, tm.Resign(context.Background()))
	require.NoError(t, tm.ReleaseDetached(election.ErrClosed, time.Second))
	require.Zero(t, calls.Load())
	<-tm.Released()
}

// The term keeps its parent's values but not its cancellation: the
// Campaign context bounds only the wait.
func TestTermOutlivesParent(t *testing.T) {
	type key struct{}
	parent, cancel := context.WithCancelCause(context.WithValue(context.Background(), key{}, "v"))
	var calls atomic.Int32
	tm := New(parent, "a", 1, func(ctx context.Context) error {
		calls.Add(1)
		require.NoError(t, ctx.Err(), "release context must be detached from the term")
		return nil
	})
	cancel(errors.New("campaign ended"))
	require.NoError(t, tm.Context().Err(), "the term ended with its parent")
	require.Equal(t, "v", tm.Context().Value(key{}))
	require.True(t, tm.PendingRelease())
	require.NoError(t, tm.ReleaseDetached(election.ErrClosed, time.Second))
	require.Equal(t, int32(1), calls.Load())
	require.ErrorIs(t, context.Cause(tm.Context()), election.ErrClosed)
}

func TestTermResignAfterLoseKeepsLossCause(t *testing.T) {
	tm := New(context.Background(), "a", 1, nil)
	tm.Lose(nil)
	require.NoError(t, tm.Resign(context.Background()))
	require.ErrorIs(t, context.Cause(tm.Context()), election.ErrLeadershipLost)
}

// TestTermYieldKeepsRelease checks that a yielded term ends as lost but,
// unlike Lose, still releases on Resign.
func TestTermYieldKeepsRelease(t *testing.T) {
	var released atomic.Int32
	tm := New(context.Background(), "a", 1, func(context.Context) error {
		released.Add(1)
		return nil
	})
	reason := errors.New("preempted")
	tm.Yield(reason)
	require.ErrorIs(t, context.Cause(tm.Context()), election.ErrLeadershipLost)
	require.ErrorIs(t, context.Cause(tm.Context()), reason)
	require.True(t, tm.PendingRelease(), "the release stays pending")
	require.NoError(t, tm.Resign(context.Background()))
	require.Equal(t, int32(1), released.Load())
	require.ErrorIs(t, context.Cause(tm.Context()), reason, "Resign keeps the yield's cause")
}
