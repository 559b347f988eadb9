package election_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/reconkit/reconkit/election"
	"github.com/reconkit/reconkit/election/electiontest"
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

// count returns how many observations of ev were made.
func (h *hooks) count(ev election.Event) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, o := range h.obs {
		if o.Event == ev {
			n++
		}
	}
	return n
}

// awaitCount waits until n observations of ev were made; it fails when
// ctx ends.
func (h *hooks) awaitCount(t *testing.T, ctx context.Context, ev election.Event, n int) {
	t.Helper()
	for {
		h.mu.Lock()
		ch := h.change
		h.mu.Unlock()
		if h.count(ev) >= n {
			return
		}
		select {
		case <-ch:
		case <-ctx.Done():
			require.FailNow(t, "timed out", "%d observations of %s, want %d", h.count(ev), ev, n)
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

// TestEtcdMetricsAndEvents checks every observation and event of the etcd
// elector on real etcd: acquisition with latency and handover, renewals
// with slack, resignation, and a loss.
func TestEtcdMetricsAndEvents(t *testing.T) {
	etcd := testenv.Etcd(t)
	admin := etcd.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const ttl = 3 * time.Second
	ha, hb := newHooks(), newHooks()
	mk := func(id string, h *hooks) *election.EtcdElector {
		e, err := election.NewEtcd(election.EtcdConfig{Client: etcd.Client(t), Prefix: "/metrics", Identity: id, SessionTTL: ttl, Metrics: h, Events: h})
		require.NoError(t, err)
		t.Cleanup(func() { _ = e.Close() })
		return e
	}
	a, b := mk("a", ha), mk("b", hb)

	la, err := a.Campaign(ctx)
	require.NoError(t, err)
	acq := ha.await(t, ctx, "a acquired", is(election.EventAcquired))
	require.Equal(t, "etcd", acq.Backend)
	require.Equal(t, "/metrics", acq.Election)
	require.Equal(t, "a", acq.Identity)
	require.Equal(t, la.Token(), acq.Token)
	require.Zero(t, acq.Handover, "nobody led before a")
	ren := ha.await(t, ctx, "a renewed", is(election.EventRenewed))
	require.Positive(t, ren.Slack, "slack at a renewal")
	require.Positive(t, ren.Latency)

	chB := make(chan election.Leadership, 1)
	go func() {
		l, err := b.Campaign(ctx)
		if err == nil {
			chB <- l
		}
	}()
	_, err = electiontest.WaitLeader(ctx, b, "a")
	require.NoError(t, err)
	// b's key is queued behind a's before a resigns.
	require.Eventually(t, func() bool {
		resp, err := admin.Get(ctx, "/metrics/", clientv3.WithPrefix(), clientv3.WithCountOnly())
		return err == nil && resp.Count == 2
	}, 30*time.Second, 10*time.Millisecond, "b's key under the prefix")
	// Two more renewals of a's (about 2s) let b list a's key and watch
	// it: a handover is measured only from a deletion b saw.
	ha.awaitCount(t, ctx, election.EventRenewed, ha.count(election.EventRenewed)+2)
	require.NoError(t, la.Resign(ctx))
	ha.await(t, ctx, "a resigned", is(election.EventResigned))
	var lb election.Leadership
	select {
	case lb = <-chB:
	case <-ctx.Done():
		require.FailNow(t, "b did not take over")
	}
	acqB := hb.await(t, ctx, "b acquired", is(election.EventAcquired))
	require.Positive(t, acqB.Handover, "b waited for a's key to go")
	require.GreaterOrEqual(t, acqB.Latency, acqB.Handover)

	// Lost: the session is revoked from outside.
	_, err = admin.Revoke(ctx, lb.(*election.EtcdLeadership).Lease())
	require.NoError(t, err)
	lost := hb.await(t, ctx, "b lost", is(election.EventLost))
	require.ErrorIs(t, lost.Err, election.ErrLeadershipLost)
	require.Equal(t, []string{"Normal LeaderElected", "Normal Resigned"}, ha.eventList())
	require.Equal(t, []string{"Normal LeaderElected", "Warning LeadershipLost"}, hb.eventList())
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
	leader := newLease(t, a.ConfigFor(p.Addr()), name, func(c *election.LeaseConfig) { c.Metrics, c.Events = ha, ha })
	follower := newLease(t, a.Config(), name, func(c *election.LeaseConfig) { c.Metrics, c.Events = hb, hb })
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
