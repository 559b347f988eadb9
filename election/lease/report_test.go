package lease_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconkit/reconkit/election"
	"github.com/reconkit/reconkit/election/electiontest"
	"github.com/reconkit/reconkit/election/lease"
	"github.com/reconkit/reconkit/internal/testenv"
)

// TestLeaseMetricsEventsAndHealthWithHungServer runs the Lease elector on
// the real apiserver with its traffic through a proxy that is then cut (a
// hung server, no answer): the health check is healthy while the holder is
// within ValidUntil and once its term ended; the loss is observed with a
// Warning event, and the successor's acquisition with its handover.
func TestLeaseMetricsEventsAndHealthWithHungServer(t *testing.T) {
	a := apiServer(t)
	p := testenv.Proxy(t, a.Addr())
	name := uniqueName("metrics")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ha, hb := electiontest.NewRecorder(), electiontest.NewRecorder()
	leader := newLease(t, a.ConfigFor(p.Addr()), name, func(c *lease.Config) { c.Metrics, c.Events = ha, ha })
	follower := newLease(t, a.Config(), name, func(c *lease.Config) { c.Metrics, c.Events = hb, hb })
	closeOnCleanup(t, follower)
	closeOnCleanup(t, leader)
	hc := leader.HealthCheck(0)
	require.NoError(t, hc.Check(nil), "before the first term")

	l, err := leader.Campaign(ctx)
	require.NoError(t, err)
	acq, err := ha.Await(ctx, electiontest.Is(election.EventAcquired))
	require.NoError(t, err, "acquired")
	require.Equal(t, "lease", acq.Backend)
	require.Equal(t, testNamespace+"/"+name, acq.Election)
	require.Equal(t, l.Token(), acq.Token)
	ren, err := ha.Await(ctx, electiontest.Is(election.EventRenewed))
	require.NoError(t, err, "renewed")
	require.Positive(t, ren.Slack)
	require.LessOrEqual(t, ren.Slack, testRenewDeadline)
	require.NoError(t, hc.Check(nil), "leading within ValidUntil")

	won := make(chan election.Leadership, 1)
	go func() {
		lf, err := follower.Campaign(ctx)
		if err == nil {
			won <- lf
		}
	}()
	_, err = electiontest.WaitLeader(ctx, follower, leader.Identity())
	require.NoError(t, err)

	p.Cut()
	if time.Now().Before(l.(election.Expiring).ValidUntil()) {
		require.NoError(t, hc.Check(nil), "hung server, holder within ValidUntil")
	}
	cause, err := electiontest.WaitTermEnded(ctx, l)
	require.NoError(t, err)
	require.ErrorIs(t, cause, election.ErrLeadershipLost)
	require.NoError(t, hc.Check(nil), "after the term ended the holder no longer leads")
	lost, err := ha.Await(ctx, electiontest.Is(election.EventLost))
	require.NoError(t, err, "lost")
	require.ErrorIs(t, lost.Err, election.ErrLeadershipLost)
	require.Equal(t, []string{"Normal LeaderElected", "Warning LeadershipLost"}, ha.Events())

	var lf election.Leadership
	select {
	case lf = <-won:
	case <-ctx.Done():
		require.FailNow(t, "the follower did not take over")
	}
	acqB, err := hb.Await(ctx, electiontest.Is(election.EventAcquired))
	require.NoError(t, err, "follower acquired")
	require.Positive(t, acqB.Handover, "the follower timed the lease's expiry")
	p.Restore()
	require.NoError(t, lf.Resign(ctx))
	_, err = hb.Await(ctx, electiontest.Is(election.EventResigned))
	require.NoError(t, err, "follower resigned")
	require.Equal(t, []string{"Normal LeaderElected", "Normal Resigned"}, hb.Events())
}
