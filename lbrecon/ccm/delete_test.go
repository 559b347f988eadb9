package ccm_test

import (
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/cloud-provider/api"

	"github.com/reconkit/reconkit/lbrecon"
	"github.com/reconkit/reconkit/lbrecon/ccm"
	"github.com/reconkit/reconkit/lbrecon/lbrecontest"
)

// The service controller backs EnsureLoadBalancerDeleted's RetryError off
// exponentially (it wraps the error with %v): with a TeardownWait, a
// teardown that waits for asynchronous deletes and a lagging listing
// between its passes converges within one call when that fits.
func TestDeleteConvergesWithinOneCallWithTeardownWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		eng := lbrecontest.New(lbrecontest.Config{Pending: time.Second, ListLag: time.Second, DeleteDelay: time.Second, Integrity: true})
		b := newBalancer(t, eng, func(c *ccm.Config) { c.Reconciler.CallTimeout, c.TeardownWait = 20*time.Second, 20*time.Second })
		svc := service("uid-1")
		_, _, err := ensure(t, b, svc, nodes(2))
		require.NoError(t, err)

		start := time.Now()
		require.NoError(t, b.EnsureLoadBalancerDeleted(t.Context(), "c", svc), "converged in one call")
		took := time.Since(start)
		require.LessOrEqual(t, took, 20*time.Second, "within TeardownWait")
		t.Logf("teardown in one call of %v", took)
		require.Empty(t, eng.Objects())
	})
}

// A teardown that cannot converge within TeardownWait returns its
// RetryError by then: the call waits between passes only while the next
// pass fits.
func TestDeleteCallEndsWithinTeardownWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		eng := lbrecontest.New(lbrecontest.Config{Latency: 300 * time.Millisecond, Pending: time.Second, ListLag: time.Second, DeleteDelay: 10 * time.Second, Integrity: true})
		b := newBalancer(t, eng, func(c *ccm.Config) { c.Reconciler.CallTimeout, c.TeardownWait = 3*time.Second, 3*time.Second })
		svc := service("uid-1")
		_, _, err := ensure(t, b, svc, nodes(2))
		require.NoError(t, err)

		for calls := 1; ; calls++ {
			require.Less(t, calls, 100)
			start := time.Now()
			err := b.EnsureLoadBalancerDeleted(t.Context(), "c", svc)
			require.LessOrEqual(t, time.Since(start), 3*time.Second, "call %d within TeardownWait", calls)
			var re *api.RetryError
			if !errors.As(err, &re) {
				require.NoError(t, err)
				require.Greater(t, calls, 1, "deletes of 10 s cannot converge in a call of 3 s")
				break
			}
			<-time.After(re.RetryAfter())
		}
		require.Empty(t, eng.Objects())
	})
}

// By default EnsureLoadBalancerDeleted holds no service worker: one pass
// per call, no wait on the clock but, in the last call, that for the
// confirmation of its destructions (within the lag and a poll: see
// confirm_test.go), a RetryError saying when to call again until the
// teardown converged.
func TestDeleteMakesOnePassPerCallByDefault(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		eng := lbrecontest.New(lbrecontest.Config{Latency: 10 * time.Millisecond, Pending: time.Second, ListLag: time.Second, DeleteDelay: time.Second, Integrity: true})
		b := newBalancer(t, eng, nil)
		svc := service("uid-1")
		_, _, err := ensure(t, b, svc, nodes(2))
		require.NoError(t, err)
		eng.ResetCalls()
		for calls := 1; ; calls++ {
			require.Less(t, calls, 100)
			start := time.Now()
			lists := eng.Calls()[lbrecon.VerbList]
			err := b.EnsureLoadBalancerDeleted(t.Context(), "c", svc)
			var re *api.RetryError
			if !errors.As(err, &re) {
				require.NoError(t, err)
				require.LessOrEqual(t, time.Since(start), time.Second+lbrecon.DefaultPollInterval+100*time.Millisecond,
					"call %d: no wait on the clock but the confirmation's, within the lag and a poll", calls)
				require.Greater(t, calls, 2, "a teardown of three levels with asynchronous deletes takes several calls")
				break
			}
			require.LessOrEqual(t, time.Since(start), 100*time.Millisecond, "call %d: no wait on the clock, only the provider's latency", calls)
			require.LessOrEqual(t, eng.Calls()[lbrecon.VerbList]-lists, 2, "call %d: one pass (a List for each teardown it runs)", calls)
			require.Contains(t, err.Error(), "call again after")
			require.NotContains(t, err.Error(), `""`, "a teardown of every load balancer names none with an empty ID")
			require.Positive(t, re.RetryAfter())
			<-time.After(re.RetryAfter())
		}
		require.Empty(t, eng.Objects())
	})
}

// With a TeardownWait, a pass that meets a failure a wait may cure ends
// the call at once: the service controller's backoff is the wait, not the
// worker.
func TestDeleteCallStopsAtATransientFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		eng := lbrecontest.New(lbrecontest.Config{Pending: time.Second, ListLag: time.Second, DeleteDelay: time.Second, Integrity: true})
		b := newBalancer(t, eng, func(c *ccm.Config) { c.Reconciler.CallTimeout, c.TeardownWait = 20*time.Second, 20*time.Second })
		svc := service("uid-1")
		_, _, err := ensure(t, b, svc, nodes(2))
		require.NoError(t, err)

		eng.FailDestroy(func(o lbrecon.Object) bool { return o.Kind == lbrecon.KindServer }, 1)
		start := time.Now()
		err = b.EnsureLoadBalancerDeleted(t.Context(), "c", svc)
		var re *api.RetryError
		require.ErrorAs(t, err, &re)
		require.ErrorIs(t, err, lbrecontest.ErrInjected)
		require.Zero(t, time.Since(start), "no wait on the clock after a transient failure")
	})
}
