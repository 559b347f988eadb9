package election

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
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

func TestTermResignReturnsReleaseError(t *testing.T) {
	boom := errors.New("boom")
	tm := newTerm(context.Background(), "a", 1, func(context.Context) error { return boom })
	require.ErrorIs(t, tm.Resign(context.Background()), boom)
	require.NoError(t, tm.Resign(context.Background()))
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
	require.NoError(t, tm.releaseDetached(time.Second))
	require.Zero(t, calls.Load())
	<-tm.releasedCh()
}

func TestTermParentCancelKeepsParentCause(t *testing.T) {
	parentErr := errors.New("shutting down")
	parent, cancel := context.WithCancelCause(context.Background())
	var calls atomic.Int32
	tm := newTerm(parent, "a", 1, func(ctx context.Context) error {
		calls.Add(1)
		require.NoError(t, ctx.Err(), "release context must be detached from the term")
		return nil
	})
	cancel(parentErr)
	<-tm.done()
	require.ErrorIs(t, context.Cause(tm.Context()), parentErr)
	require.True(t, tm.pendingRelease())
	require.False(t, tm.lose(nil), "lose after the parent ended")
	require.NoError(t, tm.releaseDetached(time.Second))
	require.Equal(t, int32(1), calls.Load())
	require.ErrorIs(t, context.Cause(tm.Context()), parentErr)
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
