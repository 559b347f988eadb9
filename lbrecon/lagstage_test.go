package lbrecon_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconkit/reconkit/lbrecon"
	"github.com/reconkit/reconkit/lbrecon/lbrecontest"
)

// The staging the orphan and duplicate tests share: a load balancer
// converged by one process on a provider with a declared lag, then
// changed behind its back (a parent deleted, a copy made) and seen by a
// new process with no memory of it.

// orphanLag is the list lag the orphan and duplicate tests declare.
const orphanLag = 2 * time.Second

// withLag declares orphanLag.
func withLag(c *lbrecon.Config) { c.ListLag = orphanLag }

// convergedWithLag returns an engine holding desc(2, 1, 2), converged by a
// reconciler with the lag declared.
func convergedWithLag(t *testing.T) (*lbrecontest.Engine, lbrecon.LoadBalancer) {
	t.Helper()
	eng := newEngine(lbrecontest.Config{})
	lb := desc(2, 1, 2)
	require.NoError(t, newLB(t, eng, lb, withLag).Reconcile(t.Context()))
	return eng, lb
}

// converge makes r converge, one pass at a time (once) or blocking.
func converge(t *testing.T, r *lbrecon.LoadBalancerReconciler, once bool) {
	t.Helper()
	if once {
		onceUntilConverged(t, r)
		return
	}
	require.NoError(t, r.Reconcile(t.Context()))
}

// onceUntilConverged calls ReconcileOnce, waiting its RequeueAfter between
// calls, until it converges (at most 50 calls).
func onceUntilConverged(t *testing.T, r *lbrecon.LoadBalancerReconciler) {
	t.Helper()
	for range 50 {
		res, err := r.ReconcileOnce(t.Context())
		if err == nil && res.Converged {
			return
		}
		d := res.RequeueAfter
		if err != nil || d <= 0 {
			d = time.Second
		}
		<-time.After(d)
	}
	t.Fatal("not converged after 50 calls")
}

// waitsOutTheLag calls ReconcileOnce for the lag, from the first call:
// each call waits and lists again (a transient ErrInconsistent), and
// destroys nothing; check, when set, runs after each.
func waitsOutTheLag(t *testing.T, eng *lbrecontest.Engine, r *lbrecon.LoadBalancerReconciler, check func()) {
	t.Helper()
	eng.ResetCalls()
	start := time.Now()
	for time.Since(start) < orphanLag {
		res, err := r.ReconcileOnce(t.Context())
		require.NoError(t, err)
		require.ErrorIs(t, res.Transient, lbrecon.ErrInconsistent, "within the lag: wait and list again")
		require.Zero(t, eng.Calls()[lbrecon.VerbDestroy], "nothing destroyed within the lag")
		if check != nil {
			check()
		}
		<-time.After(res.RequeueAfter)
	}
}
