package etcd_test

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
	"github.com/reconkit/reconkit/election/etcd"
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
	srv := testenv.Etcd(t)
	admin := srv.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const ttl = 3 * time.Second
	ha, hb := newHooks(), newHooks()
	mk := func(id string, h *hooks) *etcd.Elector {
		e, err := etcd.New(etcd.Config{Client: srv.Client(t), Prefix: "/metrics", Identity: id, SessionTTL: ttl, Metrics: h, Events: h})
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
	_, err = admin.Revoke(ctx, lb.(*etcd.Leadership).Lease())
	require.NoError(t, err)
	lost := hb.await(t, ctx, "b lost", is(election.EventLost))
	require.ErrorIs(t, lost.Err, election.ErrLeadershipLost)
	require.Equal(t, []string{"Normal LeaderElected", "Normal Resigned"}, ha.eventList())
	require.Equal(t, []string{"Normal LeaderElected", "Warning LeadershipLost"}, hb.eventList())
}
