package kubestore_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconkit/reconkit/kubefake"
	"github.com/reconkit/reconkit/versiongate"
)

// A node waiting for a status that does not admit it watches from the
// status listing's resourceVersion, not from the status Lease's own: when
// the Lease has not changed for longer than the server's watch history
// reaches back (kubefake's WatchHistory, as a busy apiserver's watch
// cache), or the server restarted and its history starts after it, the
// watch opens all the same. A wait costs one read and one watch, and a
// restart one more of each, not a read and a 410 at every retry; counted
// per ten seconds of the bubble's time.
func TestStatusWatchFromListingAfterHistoryMovedOn(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		srv := kubefake.Config{WatchHistory: 3}.NewServer()
		cs := srv.NewClient().Clientset
		writeStatus(t, ctx, cs, "herd", 3, statusAt(t, "2.0.0", versiongate.Release{Major: 2}))
		churn(t, ctx, cs, "before", 10)

		node := srv.NewClient()
		log := &requestLog{start: time.Now()}
		srv.Inject(log.fault())
		g := waitingGate(t, node.Clientset, "herd")
		ready := make(chan error, 1)
		go func() { ready <- g.WaitReady(ctx) }()

		time.Sleep(10 * time.Second)
		synctest.Wait()
		require.Equal(t, 1, log.between("list", 0, 10*time.Second), "status reads in the first 10s of the wait")
		require.Equal(t, 1, log.between("watch", 0, 10*time.Second), "status watches in the first 10s of the wait")

		// An apiserver restart: every watch ends, and the history the
		// server serves watches from starts after the node's last revision.
		churn(t, ctx, cs, "restart", 10)
		srv.EndWatches()
		time.Sleep(10 * time.Second)
		synctest.Wait()
		lists, watches := log.between("list", 10*time.Second, 20*time.Second), log.between("watch", 10*time.Second, 20*time.Second)
		t.Logf("after the restart, in 10s: %d reads, %d watches", lists, watches)
		require.LessOrEqual(t, lists, 1, "status reads in the 10s after the restart")
		require.LessOrEqual(t, watches, 2, "status watches in the 10s after the restart (one 410, one served)")
		time.Sleep(time.Minute)
		synctest.Wait()
		require.Zero(t, log.between("", 20*time.Second, 80*time.Second), "requests once the watch was open again")

		// The watch is open: a status that admits the node ends the wait.
		writeStatus(t, ctx, cs, "herd", 4, statusAt(t, "2.0.0", versiongate.Release{Major: 1}))
		require.NoError(t, <-ready)
	})
}
