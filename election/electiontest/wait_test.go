package electiontest_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconkit/reconkit/election"
	"github.com/reconkit/reconkit/election/electiontest"
)

// countingReporter counts Leading calls, so a test can tell waiting from
// polling.
type countingReporter struct {
	electiontest.LeadingReporter
	calls atomic.Int64
}

func (r *countingReporter) Leading() bool {
	r.calls.Add(1)
	return r.LeadingReporter.Leading()
}

type waited struct {
	info  election.LeaderInfo
	cause error
	err   error
}

func async(f func() waited) <-chan waited {
	ch := make(chan waited, 1)
	go func() { ch <- f() }()
	return ch
}

func pendingIn(t *testing.T, ch <-chan waited, what string) {
	t.Helper()
	synctest.Wait()
	select {
	case w := <-ch:
		require.FailNow(t, what+" returned early", "%+v", w)
	default:
	}
}

// The Wait helpers keep their promises: each returns at the state it
// waits for, not before; WaitLeading and WaitNotLeading read Leading once
// per change, never polling; each returns an error wrapping the cause of
// its context when that ends first (WaitLeader's naming the last state it
// saw); WaitTermEnded returns the term's cause.
func TestWaitHelpers(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		el := electiontest.NewElection()
		a, b := el.NewCandidate("a"), el.NewCandidate("b")
		defer func() { _ = a.Close(); _ = b.Close() }()
		boom := errors.New("boom")

		// WaitLeading: one read, then it sleeps until a change.
		ra := &countingReporter{LeadingReporter: a}
		leading := async(func() waited { return waited{err: electiontest.WaitLeading(ctx, ra)} })
		// WaitLeader("a") from b's view.
		leader := async(func() waited {
			i, err := electiontest.WaitLeader(ctx, b, "a")
			return waited{info: i, err: err}
		})
		time.Sleep(time.Hour)
		pendingIn(t, leading, "WaitLeading")
		pendingIn(t, leader, "WaitLeader")
		require.EqualValues(t, 1, ra.calls.Load(), "WaitLeading polled Leading while nothing changed")

		la, err := a.Campaign(ctx)
		require.NoError(t, err)
		require.NoError(t, (<-leading).err)
		w := <-leader
		require.NoError(t, w.err)
		require.Equal(t, "a", w.info.Identity)
		require.Equal(t, la.Token(), w.info.Token)

		// WaitNotLeading, WaitLeader("") and WaitTermEnded, until a resigns.
		ra.calls.Store(0)
		notLeading := async(func() waited { return waited{err: electiontest.WaitNotLeading(ctx, ra)} })
		none := async(func() waited {
			i, err := electiontest.WaitLeader(ctx, b, "")
			return waited{info: i, err: err}
		})
		ended := async(func() waited {
			c, err := electiontest.WaitTermEnded(ctx, la)
			return waited{cause: c, err: err}
		})
		time.Sleep(time.Hour)
		pendingIn(t, notLeading, "WaitNotLeading")
		pendingIn(t, none, "WaitLeader(\"\")")
		pendingIn(t, ended, "WaitTermEnded")
		require.EqualValues(t, 1, ra.calls.Load(), "WaitNotLeading polled Leading while nothing changed")
		require.NoError(t, la.Resign(ctx))
		require.NoError(t, (<-notLeading).err)
		w = <-none
		require.NoError(t, w.err)
		require.True(t, w.info.IsZero(), "WaitLeader(\"\"): %+v", w.info)
		w = <-ended
		require.NoError(t, w.err)
		require.ErrorIs(t, w.cause, election.ErrResigned)

		// Each wait ends with its context, wrapping the context's cause.
		lb, err := b.Campaign(ctx)
		require.NoError(t, err)
		cctx, cancel := context.WithCancelCause(ctx)
		waits := []<-chan waited{
			async(func() waited { return waited{err: electiontest.WaitLeading(cctx, a)} }),
			async(func() waited { return waited{err: electiontest.WaitNotLeading(cctx, b)} }),
			async(func() waited {
				i, err := electiontest.WaitLeader(cctx, a, "a")
				return waited{info: i, err: err}
			}),
			async(func() waited {
				c, err := electiontest.WaitTermEnded(cctx, lb)
				return waited{cause: c, err: err}
			}),
		}
		synctest.Wait()
		cancel(boom)
		for i, ch := range waits {
			w := <-ch
			require.ErrorIs(t, w.err, boom, "wait %d", i)
			require.NoError(t, w.cause, "wait %d", i)
			if i == 2 {
				require.ErrorContains(t, w.err, "Identity:b", "WaitLeader names the last state it saw")
				require.Equal(t, "b", w.info.Identity, "WaitLeader returns the last state it saw")
			}
		}
		require.NoError(t, lb.Resign(ctx))
	})
}
