package election_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/reconkit/reconkit/election"
	"github.com/reconkit/reconkit/election/electiontest"
)

// ctxElector hands out terms whose Resign records whether its context was
// live, and can end Run's context just as Campaign returns.
type ctxElector struct {
	election.Elector
	cancelOnWin context.CancelFunc // if set, called before Campaign returns a term

	mu         sync.Mutex
	resignErrs []error // the Resign context's Err at each call
}

func (c *ctxElector) Campaign(ctx context.Context) (election.Leadership, error) {
	l, err := c.Elector.Campaign(ctx)
	if err != nil {
		return nil, err
	}
	if c.cancelOnWin != nil {
		c.cancelOnWin()
	}
	return &ctxLeadership{Leadership: l, c: c}, nil
}

type ctxLeadership struct {
	election.Leadership
	c *ctxElector
}

func (l *ctxLeadership) Resign(ctx context.Context) error {
	l.c.mu.Lock()
	l.c.resignErrs = append(l.c.resignErrs, ctx.Err())
	l.c.mu.Unlock()
	return l.Leadership.Resign(ctx)
}

func (c *ctxElector) resigns() []error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]error(nil), c.resignErrs...)
}

// When Run's context ends while Campaign returns a term, Run gives the term
// back at once, with a context of its own: the term never reaches lead and
// a successor does not wait for it to expire.
func TestRunReleasesATermWonAsItsContextEnded(t *testing.T) {
	e := electiontest.NewElection()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := &ctxElector{Elector: e.NewCandidate("a"), cancelOnWin: cancel}
	var leads atomic.Int32
	err := election.Run(ctx, c, func(context.Context, election.Leadership) error { leads.Add(1); return nil })
	require.NoError(t, err)
	require.Zero(t, leads.Load(), "lead ran for a term won as Run's context ended")
	require.True(t, e.Leader().IsZero(), "the term was not given back")
	require.Equal(t, []error{nil}, c.resigns(), "Resign's context, once")
}

// Cancelling Run's context is how a host steps down: the release that
// follows gets a live context (bounded by the release timeout), not the
// cancelled one, so that it reaches the server.
func TestRunReleasesWithALiveContextAfterCancel(t *testing.T) {
	e := electiontest.NewElection()
	c := &ctxElector{Elector: e.NewCandidate("a")}
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan struct{})
	done := runAsync(ctx, c, func(ctx context.Context, _ election.Leadership) error {
		close(started)
		<-ctx.Done()
		return ctx.Err()
	})
	select {
	case <-started:
	case <-time.After(waitFor):
		require.FailNow(t, "lead did not start")
	}
	cancel()
	require.NoError(t, waitDone(t, done))
	require.Equal(t, []error{nil}, c.resigns(), "Resign's context, once")
}

// The pause after each short term grows by half up to the maximum: 1s,
// 1.5s, 2.25s, then 3s. Measured on a fake clock in a synctest bubble, so
// a check after a step sees everything the step made due.
func TestRunStepDownPauseGrows(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := electiontest.NewElection()
		c := e.NewCandidate("a")
		clk := testingclock.NewFakeClock(time.Unix(1_800_000_000, 0))
		var terms atomic.Int32
		ctx, cancel := context.WithCancel(context.Background())
		done := runAsync(ctx, c, func(context.Context, election.Leadership) error { terms.Add(1); return nil },
			election.WithRetryJitter(0), election.WithRetryInterval(time.Second, 3*time.Second), election.WithRunClock(clk))
		synctest.Wait()
		require.Equal(t, int32(1), terms.Load())
		for i, pause := range []time.Duration{time.Second, 1500 * time.Millisecond, 2250 * time.Millisecond, 3 * time.Second, 3 * time.Second} {
			clk.Step(pause - time.Millisecond)
			synctest.Wait()
			require.Equal(t, int32(i+1), terms.Load(), "campaigned before pause %d (%v) ended", i+1, pause)
			clk.Step(time.Millisecond)
			synctest.Wait()
			require.Equal(t, int32(i+2), terms.Load(), "no term after pause %d (%v)", i+1, pause)
		}
		cancel()
		require.NoError(t, <-done)
	})
}
