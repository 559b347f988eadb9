package nodestatus_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"
	testclock "k8s.io/utils/clock/testing"

	"github.com/reconkit/reconkit/kubefake"
)

// LeaseRenewal reports when the renewing write was sent, not when its
// answer came, and the Lease object it renewed; nothing for another node.
func TestLeaseRenewalReportsSendTime(t *testing.T) {
	cs := kubefake.NewClientset()
	clk := testclock.NewFakeClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	var slow atomic.Bool
	cs.PrependReactor("update", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
		if slow.Swap(false) {
			clk.Step(3 * time.Second) // the answer takes 3s
		}
		return false, nil, nil
	})
	c := start(t, fakeConfig(cs, clk, nil))
	waitReady(t, c)
	_, _, ok := c.LeaseRenewal("another-node")
	require.False(t, ok)

	slow.Store(true)
	before := clk.Now()
	stepUntil(t, clk, 500*time.Millisecond, func() bool {
		s, _, ok := c.LeaseRenewal("vk-0")
		return ok && s.After(before)
	})
	idle(t, clk)
	require.False(t, slow.Load(), "the renewal went through the slow reactor")
	sent, uid, ok := c.LeaseRenewal("vk-0")
	require.True(t, ok)
	got, _ := c.LastHeartbeat()
	require.GreaterOrEqual(t, got.Sub(sent), 3*time.Second, "the send time is before the slow answer")
	l, err := cs.CoordinationV1().Leases("kube-node-lease").Get(context.Background(), "vk-0", metav1.GetOptions{})
	require.NoError(t, err)
	require.NotEmpty(t, uid)
	require.Equal(t, l.UID, uid)
}
