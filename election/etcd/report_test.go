package etcd_test

import (
	"context"
	"strings"
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

// keyWatches is a client's Watcher that closes opened at the first watch
// of one key under prefix (not of the prefix itself, as Observe's is): a
// candidate watching the key of the candidate ahead, from the revision it
// read it at.
type keyWatches struct {
	clientv3.Watcher
	prefix string
	once   sync.Once
	opened chan struct{}
}

func (w *keyWatches) Watch(ctx context.Context, key string, opts ...clientv3.OpOption) clientv3.WatchChan {
	ch := w.Watcher.Watch(ctx, key, opts...)
	if strings.HasPrefix(key, w.prefix) && key != w.prefix {
		w.once.Do(func() { close(w.opened) })
	}
	return ch
}

// TestEtcdMetricsAndEvents checks every observation and event of the etcd
// elector on real etcd: acquisition with latency and handover, renewals
// with slack, resignation, and a loss.
func TestEtcdMetricsAndEvents(t *testing.T) {
	t.Parallel() // an etcd of its own; waits on TTLs, not the CPU
	srv := testenv.Etcd(t)
	admin := srv.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const ttl = 3 * time.Second
	ha, hb := electiontest.NewRecorder(), electiontest.NewRecorder()
	mk := func(id string, cli *clientv3.Client, h *electiontest.Recorder) *etcd.Elector {
		e, err := etcd.New(etcd.Config{Client: cli, Prefix: "/metrics", Identity: id, SessionTTL: ttl, Metrics: h, Events: h})
		require.NoError(t, err)
		t.Cleanup(func() { _ = e.Close() })
		return e
	}
	cliB := srv.Client(t)
	predecessor := &keyWatches{Watcher: cliB.Watcher, prefix: "/metrics/", opened: make(chan struct{})}
	cliB.Watcher = predecessor
	a, b := mk("a", srv.Client(t), ha), mk("b", cliB, hb)

	la, err := a.Campaign(ctx)
	require.NoError(t, err)
	acq, err := ha.Await(ctx, electiontest.Is(election.EventAcquired))
	require.NoError(t, err, "a acquired")
	require.Equal(t, "etcd", acq.Backend)
	require.Equal(t, "/metrics", acq.Election)
	require.Equal(t, "a", acq.Identity)
	require.Equal(t, la.Token(), acq.Token)
	require.Zero(t, acq.Handover, "nobody led before a")
	ren, err := ha.Await(ctx, electiontest.Is(election.EventRenewed))
	require.NoError(t, err, "a renewed")
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
	// A handover is measured only from a deletion b saw: a resigns once b
	// has read a's key and watches it from there, not after a wait that a
	// loaded machine can outlast (b would then find the key gone).
	select {
	case <-predecessor.opened:
	case <-ctx.Done():
		require.FailNow(t, "b never watched a's key")
	}
	require.NoError(t, la.Resign(ctx))
	_, err = ha.Await(ctx, electiontest.Is(election.EventResigned))
	require.NoError(t, err, "a resigned")
	var lb election.Leadership
	select {
	case lb = <-chB:
	case <-ctx.Done():
		require.FailNow(t, "b did not take over")
	}
	acqB, err := hb.Await(ctx, electiontest.Is(election.EventAcquired))
	require.NoError(t, err, "b acquired")
	require.Positive(t, acqB.Handover, "b waited for a's key to go")
	require.GreaterOrEqual(t, acqB.Latency, acqB.Handover)

	// Lost: the session is revoked from outside.
	_, err = admin.Revoke(ctx, lb.(*etcd.Leadership).Lease())
	require.NoError(t, err)
	lost, err := hb.Await(ctx, electiontest.Is(election.EventLost))
	require.NoError(t, err, "b lost")
	require.ErrorIs(t, lost.Err, election.ErrLeadershipLost)
	require.Equal(t, []string{"Normal LeaderElected", "Normal Resigned"}, ha.Events())
	require.Equal(t, []string{"Normal LeaderElected", "Warning LeadershipLost"}, hb.Events())
}
