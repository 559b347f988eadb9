package nodestatus_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/reconkit/reconkit/internal/testenv"
	"github.com/reconkit/reconkit/nodestatus"
)

// TestRequestsAfterRealAPIServerRestart restarts a real kube-apiserver
// (SIGTERM, start again on the same port and storage) under a running
// controller whose clock is stepped 100 ms at a time while it is idle, so
// that its retries run while the server is down. Over the minute of its
// clock after the server is ready again, the controller sends no more than
// its steady state (6 renewals) and one recovery (a GET of the Node and a
// status PATCH), with slack for a renewal cut in flight.
func TestRequestsAfterRealAPIServerRestart(t *testing.T) {
	t.Parallel() // a server of its own
	a := testenv.APIServer(t)
	admin, err := kubernetes.NewForConfig(a.Config())
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		_, err := admin.CoreV1().Namespaces().Get(context.Background(), "kube-node-lease", metav1.GetOptions{})
		return err == nil
	}, waitFor, 50*time.Millisecond, "kube-node-lease namespace")
	cs, tc := countedClient(t, a.Config())
	clk := newClock()
	c := startReady(t, nodestatus.Config{Client: cs, Node: testNode("restart"), Clock: clk})
	idle(t, clk)

	var restarted atomic.Bool
	errc := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		errc <- a.Restart(ctx)
		restarted.Store(true)
	}()
	steps := 0
	for !restarted.Load() {
		step(t, clk, 100*time.Millisecond)
		steps++
	}
	require.NoError(t, <-errc)
	// The work the last step set off is counted with the outage, not
	// with the minute after it.
	idle(t, clk)
	down := tc.snapshot()
	t.Logf("%d steps of 100 ms while the apiserver restarted; requests so far: %v", steps, down)
	for range 600 {
		step(t, clk, 100*time.Millisecond)
	}
	idle(t, clk)
	after := tc.snapshot()
	total, by := 0, map[string]int{}
	for k, v := range after {
		if d := v - down[k]; d > 0 {
			total += d
			by[k] = d
		}
	}
	t.Logf("requests in the minute after the restart: %d, by kind: %v", total, by)
	require.LessOrEqual(t, total, 6+2+3, "requests in the minute after the restart")
	require.Greater(t, total, 0)
	require.Nil(t, c.Err(), "Run goes on")
}
