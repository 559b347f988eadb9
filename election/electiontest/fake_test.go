package electiontest_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/reconkit/reconkit/election"
	"github.com/reconkit/reconkit/election/electiontest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestFakeConformance(t *testing.T) {
	electiontest.Run(t, func(t *testing.T) electiontest.Subject {
		e := electiontest.NewElection()
		return electiontest.Subject{
			NewCandidate: func(*testing.T) election.Elector { return e.NewCandidate("") },
			KillSession: func(t *testing.T, c election.Elector) {
				require.True(t, c.(*electiontest.Candidate).Kill(), "Kill: candidate was not leading")
			},
			Partition: func(t *testing.T, c election.Elector) func() {
				fc := c.(*electiontest.Candidate)
				fc.Partition()
				return fc.Heal
			},
			Timeout: 5 * time.Second,
		}
	})
}

type result struct {
	l   election.Leadership
	err error
}

func campaign(ctx context.Context, c *electiontest.Candidate) <-chan result {
	ch := make(chan result, 1)
	go func() {
		l, err := c.Campaign(ctx)
		ch <- result{l, err}
	}()
	return ch
}

func get(t *testing.T, ch <-chan result) election.Leadership {
	t.Helper()
	select {
	case r := <-ch:
		require.NoError(t, r.err)
		return r.l
	case <-time.After(5 * time.Second):
		require.FailNow(t, "Campaign did not return")
		return nil
	}
}

func TestManualElectAndDepose(t *testing.T) {
	ctx := context.Background()
	e := electiontest.NewElection(electiontest.Manual())
	a, b := e.NewCandidate("a"), e.NewCandidate("b")
	require.ErrorIs(t, e.Elect(a), electiontest.ErrNotCampaigning)
	require.False(t, e.Depose())

	chA, chB := campaign(ctx, a), campaign(ctx, b)
	require.Eventually(t, func() bool { return e.Elect(b) == nil }, 5*time.Second, time.Millisecond)
	lb := get(t, chB)
	require.Equal(t, election.LeaderInfo{Identity: "b", Token: 1}, e.Leader())

	// Electing a deposes b, once a waits in Campaign (its goroutine may
	// not have reached it yet).
	require.Eventually(t, func() bool { return e.Elect(a) == nil }, 5*time.Second, time.Millisecond)
	la := get(t, chA)
	recv(t, lb.Context().Done(), "the end of b's term")
	require.ErrorIs(t, context.Cause(lb.Context()), election.ErrLeadershipLost)
	require.Equal(t, election.Token(2), la.Token())

	// Depose leaves the seat empty in manual mode.
	require.True(t, e.Depose())
	require.ErrorIs(t, context.Cause(la.Context()), election.ErrLeadershipLost)
	require.True(t, e.Leader().IsZero())
	_, err := a.Leader(ctx)
	require.ErrorIs(t, err, election.ErrNoLeader)
}

func TestPartition(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	e := electiontest.NewElection()
	a, b := e.NewCandidate("a"), e.NewCandidate("b")
	la := get(t, campaign(ctx, a))
	obs := a.Observe(ctx)
	require.Equal(t, "a", recv(t, obs, "the first observation").Identity)

	chB := campaign(ctx, b)
	a.Partition()
	require.ErrorIs(t, context.Cause(la.Context()), election.ErrLeadershipLost)
	lb := get(t, chB)
	_, err := a.Leader(ctx)
	require.ErrorIs(t, err, electiontest.ErrPartitioned)

	// A partitioned candidate cannot win even when the seat is empty.
	chA := campaign(ctx, a)
	require.NoError(t, lb.Resign(ctx))
	require.True(t, e.Leader().IsZero())
	select {
	case r := <-chA:
		require.FailNow(t, "partitioned candidate won", "%+v", r)
	default:
	}

	a.Heal()
	la2 := get(t, chA)
	require.Equal(t, election.Token(3), la2.Token())
	for info := range obs {
		if info.Identity == "a" && info.Token == 3 {
			break
		}
	}
	require.NoError(t, la2.Resign(ctx))
}

func TestCampaignTwiceIsBusy(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	e := electiontest.NewElection(electiontest.Manual())
	a := e.NewCandidate("a")
	ch := campaign(ctx, a)
	require.NoError(t, e.AwaitWaiting(ctx, 1))
	require.Equal(t, []string{"a"}, e.Waiting())
	_, err := a.Campaign(ctx)
	require.ErrorIs(t, err, electiontest.ErrBusy)
	require.NoError(t, e.Elect(a))
	l := get(t, ch)
	_, err = a.Campaign(ctx)
	require.ErrorIs(t, err, electiontest.ErrBusy, "Campaign while leading")
	require.NoError(t, l.Context().Err())
	require.NoError(t, l.Resign(ctx))
}

// requireClosed asserts that ch is closed now: the fake changes state
// synchronously, so no wait is needed.
func requireClosed(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	default:
		require.FailNow(t, "channel not closed", what)
	}
}

func TestFakeLeadingAndLeadingChanged(t *testing.T) {
	e := electiontest.NewElection()
	a, b := e.NewCandidate("a"), e.NewCandidate("b")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.False(t, a.Leading())
	changed := a.LeadingChanged()
	require.Equal(t, changed, a.LeadingChanged(), "one channel until the next change")

	la := get(t, campaign(ctx, a))
	requireClosed(t, changed, "LeadingChanged after a won")
	require.True(t, a.Leading())
	require.NoError(t, electiontest.WaitLeading(ctx, a))
	require.False(t, b.Leading())

	// Loss by partition: the flag drops with the term, and b takes over.
	changed = a.LeadingChanged()
	chB := campaign(ctx, b)
	require.NoError(t, e.AwaitWaiting(ctx, 1))
	a.Partition()
	requireClosed(t, changed, "LeadingChanged after a was partitioned")
	require.False(t, a.Leading())
	require.Error(t, la.Context().Err())
	lb := get(t, chB)
	require.NoError(t, electiontest.WaitLeading(ctx, b))
	require.NoError(t, electiontest.WaitNotLeading(ctx, a))
	a.Heal()

	// Resign drops the flag too.
	changed = b.LeadingChanged()
	require.NoError(t, lb.Resign(ctx))
	requireClosed(t, changed, "LeadingChanged after b resigned")
	require.False(t, b.Leading())

	// The waits end with their context.
	done, stop := context.WithCancel(ctx)
	stop()
	require.ErrorIs(t, electiontest.WaitLeading(done, b), context.Canceled)
	_, err := electiontest.WaitTermEnded(done, get(t, campaign(ctx, b)))
	require.ErrorIs(t, err, context.Canceled)
	info, err := electiontest.WaitLeader(ctx, a, "b")
	require.NoError(t, err)
	require.Equal(t, "b", info.Identity)
}
