package lease_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconkit/reconkit/election"
	"github.com/reconkit/reconkit/election/electiontest"
	"github.com/reconkit/reconkit/election/lease"
	"github.com/reconkit/reconkit/internal/testenv"
)

// hooks records an elector's observations and events, and wakes waiters
// at each one.
type hooks struct {
	mu     sync.Mutex
	obs    []election.Observation
	events []string // "type reason"
	change chan struct{}
}

func newHooks() *hooks { return &hooks{change: make(chan struct{})} }

func (h *hooks) Observe(o election.Observation) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.obs = append(h.obs, o)
	close(h.change)
	h.change = make(chan struct{})
}

func (h *hooks) Event(eventtype, reason, message string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.events = append(h.events, eventtype+" "+reason)
	close(h.change)
	h.change = make(chan struct{})
}

// await waits until an observation satisfies ok and returns it; it fails
// when ctx ends.
func (h *hooks) await(t *testing.T, ctx context.Context, what string, ok func(election.Observation) bool) election.Observation {
	t.Helper()
	for {
		h.mu.Lock()
		for _, o := range h.obs {
			if ok(o) {
				h.mu.Unlock()
				return o
			}
		}
		ch, seen := h.change, fmt.Sprint(h.obs)
		h.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			require.FailNow(t, "timed out", "%s: not observed; seen %s", what, seen)
		}
	}
}

func (h *hooks) eventList() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.events...)
}

func is(ev election.Event) func(election.Observation) bool {
	return func(o election.Observation) bool { return o.Event == ev }
}

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
	ha, hb := newHooks(), newHooks()
	leader := newLease(t, a.ConfigFor(p.Addr()), name, func(c *lease.Config) { c.Metrics, c.Events = ha, ha })
	follower := newLease(t, a.Config(), name, func(c *lease.Config) { c.Metrics, c.Events = hb, hb })
	t.Cleanup(func() { _ = follower.Close() })
	t.Cleanup(func() { _ = leader.Close() })
	hc := leader.HealthCheck(0)
	require.NoError(t, hc.Check(nil), "before the first term")

	l, err := leader.Campaign(ctx)
	require.NoError(t, err)
	acq := ha.await(t, ctx, "acquired", is(election.EventAcquired))
	require.Equal(t, "lease", acq.Backend)
	require.Equal(t, testNamespace+"/"+name, acq.Election)
	require.Equal(t, l.Token(), acq.Token)
	ren := ha.await(t, ctx, "renewed", is(election.EventRenewed))
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
	lost := ha.await(t, ctx, "lost", is(election.EventLost))
	require.ErrorIs(t, lost.Err, election.ErrLeadershipLost)
	require.Equal(t, []string{"Normal LeaderElected", "Warning LeadershipLost"}, ha.eventList())

	var lf election.Leadership
	select {
	case lf = <-won:
	case <-ctx.Done():
		require.FailNow(t, "the follower did not take over")
	}
	acqB := hb.await(t, ctx, "follower acquired", is(election.EventAcquired))
	require.Positive(t, acqB.Handover, "the follower timed the lease's expiry")
	p.Restore()
	require.NoError(t, lf.Resign(ctx))
	hb.await(t, ctx, "follower resigned", is(election.EventResigned))
	require.Equal(t, []string{"Normal LeaderElected", "Normal Resigned"}, hb.eventList())
}
