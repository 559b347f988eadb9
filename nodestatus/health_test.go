package nodestatus_test

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/reconkit/reconkit/kubefake"
	"github.com/reconkit/reconkit/nodestatus"
)

// TestHeartbeatCheck: the check holds while the lease renews, fails once
// no renewal has succeeded for the bound, heals with the next renewal and
// fails for good once Run has returned.
func TestHeartbeatCheck(t *testing.T) {
	cs := kubefake.NewClientset()
	var failRenewals atomic.Bool
	cs.PrependReactor("update", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
		if failRenewals.Load() {
			return true, nil, apierrors.NewServiceUnavailable("etcd is down")
		}
		return false, nil, nil
	})
	clk := newFakeClock()
	r := start(t, fakeConfig(cs, clk, nil))
	check := r.HeartbeatCheck(0) // the lease duration, 40s
	waitReady(t, r)
	require.NoError(t, check(nil))
	for range 8 { // two lease durations of renewals
		step(t, clk, 10500*time.Millisecond)
		require.NoError(t, check(nil))
	}

	failRenewals.Store(true)
	stepUntil(t, clk, time.Second, func() bool { return check(nil) != nil })
	err := check(nil)
	require.ErrorIs(t, err, nodestatus.ErrHeartbeatStale)
	last, ok := r.LastHeartbeat()
	require.True(t, ok)
	age := clk.Since(last)
	require.Greater(t, age, 40*time.Second, "fails only past the bound: %v", err)
	require.LessOrEqual(t, age, 41*time.Second, "fails at the bound: %v", err)

	failRenewals.Store(false)
	stepUntil(t, clk, time.Second, func() bool { return check(nil) == nil })
	require.NoError(t, r.stop(t))
	require.ErrorIs(t, check(nil), nodestatus.ErrHeartbeatStale, "Run has returned")
}

// TestHeartbeatCheckBeforeRun: a check made before Run gives the
// controller one bound to start and heartbeat.
func TestHeartbeatCheckBeforeRun(t *testing.T) {
	clk := newFakeClock()
	c, err := nodestatus.New(fakeConfig(kubefake.NewClientset(), clk, nil))
	require.NoError(t, err)
	check := c.HeartbeatCheck(10 * time.Second)
	_, ok := c.LastHeartbeat()
	require.False(t, ok)
	clk.Step(10 * time.Second)
	require.NoError(t, check(nil))
	clk.Step(time.Millisecond)
	require.ErrorIs(t, check(nil), nodestatus.ErrHeartbeatStale)
}

// TestHeartbeatCheckWithoutLeases: where heartbeats are status writes, each
// one counts.
func TestHeartbeatCheckWithoutLeases(t *testing.T) {
	cs := fake.NewClientset()
	cs.PrependReactor("*", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, &apierrors.StatusError{ErrStatus: metav1.Status{
			Status: metav1.StatusFailure, Code: 404, Reason: metav1.StatusReasonNotFound,
			Message: "the server could not find the requested resource",
		}}
	})
	v := countVerbs(cs)
	clk := newFakeClock()
	r := start(t, fakeConfig(cs, clk, nil))
	check := r.HeartbeatCheck(15 * time.Second)
	waitReady(t, r)
	base := v.get("patch nodes/status")
	for i := 1; i <= 6; i++ {
		step(t, clk, 10500*time.Millisecond)
		require.Eventually(t, func() bool { return v.get("patch nodes/status") >= base+i }, waitFor, time.Millisecond)
		idle(t, clk)
		require.NoError(t, check(nil), "status heartbeat %d", i)
	}
}
