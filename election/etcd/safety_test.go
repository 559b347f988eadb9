package etcd_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/stretchr/testify/require"

	"github.com/reconkit/reconkit/election"
	"github.com/reconkit/reconkit/election/electiontest"
	"github.com/reconkit/reconkit/internal/testenv"
)

// logSignal returns a context whose logger closes the returned channel the
// first time a message containing substr is logged.
func logSignal(t *testing.T, substr string) (context.Context, <-chan struct{}) {
	ch := make(chan struct{})
	var once sync.Once
	log := funcr.New(func(prefix, args string) {
		if strings.Contains(args, substr) {
			once.Do(func() { close(ch) })
		}
	}, funcr.Options{Verbosity: 1})
	return logr.NewContext(context.Background(), log), ch
}

// The term's watch ends when its etcd member loses the leader
// (WithRequireLeader). It must be re-established: a key deleted after the
// cluster recovered ends the term through the watch, at once, not at the
// next renewal (a third of a 300s TTL away).
func TestEtcdTermWatchReestablishedAfterLeaderLoss(t *testing.T) {
	t.Parallel() // an etcd of its own; waits on TTLs, not the CPU
	srv := testenv.Etcd(t, testenv.Members(3))
	cli := testenv.NewEtcdClient(t, srv.Members[0].ClientAddr())
	admin := testenv.NewEtcdClient(t, srv.Members[0].ClientAddr())
	ctx, watchEnded := logSignal(t, "Watching the candidate key ended")
	e := newEtcd(t, cli, "/rewatch", "a", 300*time.Second)
	lctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	l, err := e.CampaignEtcd(lctx)
	require.NoError(t, err)

	// Without a quorum, member 0 has no leader and cancels the watch.
	require.NoError(t, srv.Members[1].Pause())
	require.NoError(t, srv.Members[2].Pause())
	select {
	case <-watchEnded:
	case <-time.After(time.Minute):
		t.Fatal("the term's watch did not end while its member had no leader")
	}
	require.NoError(t, srv.Members[1].Resume())
	require.NoError(t, srv.Members[2].Resume())
	require.Eventually(t, func() bool {
		dctx, dcancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer dcancel()
		_, err := admin.Delete(dctx, l.Key())
		return err == nil
	}, time.Minute, 100*time.Millisecond, "delete the candidate key once the cluster is back")

	select {
	case <-l.Context().Done():
	case <-time.After(time.Minute):
		t.Fatal("the term did not end after its key was deleted")
	}
	cause := context.Cause(l.Context())
	require.ErrorIs(t, cause, election.ErrLeadershipLost)
	require.ErrorContains(t, cause, "the candidate key was deleted", "the loss must come from the watch, not from a renewal")
}

// A Resign that fails (etcd unreachable) returns its error, and can be
// retried: the retry revokes the lease, and only then returns nil.
func TestEtcdResignFailsThenRetries(t *testing.T) {
	srv := testenv.Etcd(t)
	proxy := testenv.Proxy(t, srv.Members[0].ClientAddr())
	cli := testenv.NewEtcdClient(t, proxy.Addr())
	admin := srv.Client(t)
	e := newEtcd(t, cli, "/resign-retry", "a", 30*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	l, err := e.CampaignEtcd(ctx)
	require.NoError(t, err)

	proxy.Cut()
	rctx, rcancel := context.WithTimeout(ctx, time.Second)
	err = l.Resign(rctx)
	rcancel()
	require.Error(t, err, "Resign through a cut connection must fail, not report a release")
	require.ErrorIs(t, context.Cause(l.Context()), election.ErrResigned)
	resp, err := admin.Get(ctx, l.Key())
	require.NoError(t, err)
	require.Len(t, resp.Kvs, 1, "the key is still there after a failed Resign")

	proxy.Restore()
	require.Eventually(t, func() bool {
		rctx, rcancel := context.WithTimeout(ctx, 2*time.Second)
		defer rcancel()
		return l.Resign(rctx) == nil
	}, time.Minute, 10*time.Millisecond, "retried Resign")
	// Resign returned nil: the revoke is done, the key is gone now.
	resp, err = admin.Get(ctx, l.Key())
	require.NoError(t, err)
	require.Empty(t, resp.Kvs, "Resign returned nil before the lease was revoked")
}

// Both electors report leadership without a request and signal changes.
func TestEtcdLeadingAndLeadingChanged(t *testing.T) {
	srv := testenv.Etcd(t)
	e := newEtcd(t, srv.Client(t), "/leading", "a", 10*time.Second)
	require.False(t, e.Leading())
	changed := e.LeadingChanged()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	l, err := e.Campaign(ctx)
	require.NoError(t, err)
	requireClosedWithin(t, ctx, changed, "LeadingChanged after the term began")
	require.True(t, e.Leading())
	require.NoError(t, electiontest.WaitLeading(ctx, e))
	changed = e.LeadingChanged()
	require.NoError(t, l.Resign(ctx))
	requireClosedWithin(t, ctx, changed, "LeadingChanged after Resign")
	require.False(t, e.Leading())
	require.NoError(t, electiontest.WaitNotLeading(ctx, e))
}

// requireClosedWithin waits for ch to be closed, failing when ctx ends.
func requireClosedWithin(t *testing.T, ctx context.Context, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-ctx.Done():
		require.FailNow(t, "timed out", "%s: channel not closed: %v", what, context.Cause(ctx))
	}
}
