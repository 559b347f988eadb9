package kubestore_test

import (
	"context"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/reconkit/reconkit/internal/testenv"
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

// On a real apiserver, nodes waiting for a status that does not admit them
// recover from an apiserver restart with a few requests each, not a read
// and a 410 every retry: counted per node from the restart until it has
// read and watched again, then over 10s after.
func TestWaitingNodesRecoverFromAPIServerRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a kube-apiserver (internal/testenv); skipped under -short")
	}
	a := testenv.APIServer(t)
	cs := clientFor(t, a.Config())
	ctx := testCtx(t)
	_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: testNamespace}}, metav1.CreateOptions{})
	require.NoError(t, err)
	writeStatus(t, ctx, cs, "restart", 3, statusAt(t, "2.0.0", versiongate.Release{Major: 2}))

	const nodes = 10
	hooks := make([]*hooks, nodes)
	ready := make(chan error, nodes)
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for i := range nodes {
		ncs, h := wrap(clientFor(t, a.Config()))
		hooks[i] = h
		g := waitingGate(t, ncs, "restart")
		go func() { ready <- g.WaitReady(wctx) }()
	}
	requests := func() (lists, watches []int64) {
		for _, h := range hooks {
			lists, watches = append(lists, h.lists.Load()), append(watches, h.watches.Load())
		}
		return lists, watches
	}
	// Every node has read and opened its watch.
	require.Eventually(t, func() bool {
		_, w := requests()
		return !slices.Contains(w, 0)
	}, time.Minute, 10*time.Millisecond)

	l0, w0 := requests()
	restarted := time.Now()
	rctx, rcancel := context.WithTimeout(ctx, time.Minute)
	defer rcancel()
	require.NoError(t, a.Restart(rctx))
	t.Logf("apiserver restarted in %v", time.Since(restarted).Round(time.Millisecond))
	// Every node reads again and opens a new watch; then, for 10s, none
	// reads and watches more than once more (its first watch may get 410
	// if its revision is older than the restarted server's history).
	require.Eventually(t, func() bool {
		l, w := requests()
		for i := range nodes {
			if l[i] == l0[i] || w[i] == w0[i] {
				return false
			}
		}
		return true
	}, time.Minute, 10*time.Millisecond, "every node read the status and watched it again")
	l1, w1 := requests()
	recovered := time.Since(restarted)
	require.Never(t, func() bool {
		l, w := requests()
		for i := range nodes {
			if l[i] > l1[i]+1 || w[i] > w1[i]+1 {
				return true
			}
		}
		return false
	}, 10*time.Second, 100*time.Millisecond, "a node read the status or watched it twice more after it watched again")
	l2, w2 := requests()
	for i := range nodes {
		t.Logf("node %d: %d reads and %d watches in the %v from the restart to its recovery, %d and %d in the 10s after",
			i, l1[i]-l0[i], w1[i]-w0[i], recovered.Round(time.Millisecond), l2[i]-l1[i], w2[i]-w1[i])
		// Retries from 100ms doubling while the server is down, then one
		// read and one watch (two if the first gets 410).
		require.LessOrEqual(t, l1[i]-l0[i], int64(10), "node %d: status reads from the restart to its recovery", i)
		require.LessOrEqual(t, w1[i]-w0[i], int64(10), "node %d: status watches from the restart to its recovery", i)
	}
	select {
	case err := <-ready:
		t.Fatalf("a node passed WaitReady on a status that does not admit it: %v", err)
	default:
	}
	// The watches are open: a status that admits the nodes ends every wait.
	writeStatus(t, ctx, cs, "restart", 4, statusAt(t, "2.0.0", versiongate.Release{Major: 1}))
	deadline := time.After(2 * time.Minute)
	for range nodes {
		select {
		case err := <-ready:
			require.NoError(t, err)
		case <-deadline:
			t.Fatal("a node did not pass WaitReady within 2 minutes of a status that admits it")
		}
	}
}
