package lease

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/reconkit/reconkit/kubefake"
)

// leaseLists counts the Lease lists cs has served.
func leaseLists(cs *fake.Clientset) int {
	n := 0
	for _, a := range cs.Actions() {
		if a.GetVerb() == "list" && a.GetResource().Resource == "leases" {
			n++
		}
	}
	return n
}

// While every watch of the Lease fails, a follower polls it every
// RetryPeriod of its clock, no more: it sees a release at the next poll
// and takes the lease then, long before the old holder's lease would
// have expired.
func TestFollowerPollsEveryRetryPeriodWhileTheWatchFails(t *testing.T) {
	clk := testingclock.NewFakeClock(epoch)
	stamp := metav1.NewMicroTime(epoch)
	cs := kubefake.Config{Clock: clk}.NewClientset(&coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "lease"},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity: ptr.To("other"), LeaseDurationSeconds: ptr.To[int32](30),
			AcquireTime: &stamp, RenewTime: &stamp, LeaseTransitions: ptr.To[int32](4),
		},
	})
	cs.PrependWatchReactor("leases", func(k8stesting.Action) (bool, watch.Interface, error) {
		return true, nil, errors.New("watch refused")
	})
	f := newFakeLease(t, cs, clk) // RetryPeriod 300ms
	closeOnCleanup(t, f)
	ctx, cancel := context.WithTimeout(context.Background(), recvDeadline)
	defer cancel()
	ch := campaignAsync(ctx, f.Elector)
	require.Eventually(t, func() bool { return leaseLists(cs) == 1 && clk.HasWaiters() }, 10*time.Second, time.Millisecond, "first read")

	// 10 RetryPeriods in steps of a third of one, each step given 50ms to
	// show its poll: at most one list per period (a poll armed late by a
	// busy machine only lowers the count), and at least one more.
	for range 30 {
		clk.Step(100 * time.Millisecond)
		n := leaseLists(cs)
		select {
		case <-waitFor(func() bool { return leaseLists(cs) > n }):
		case <-time.After(50 * time.Millisecond):
		}
	}
	n := leaseLists(cs)
	t.Logf("%d lists within 10 RetryPeriods", n)
	require.LessOrEqual(t, n, 11, "lists within 10 RetryPeriods")
	require.GreaterOrEqual(t, n, 2, "no poll within 10 RetryPeriods")

	// The holder releases: the next poll sees it and the follower leads.
	l, err := cs.CoordinationV1().Leases("ns").Get(ctx, "lease", metav1.GetOptions{})
	require.NoError(t, err)
	l.Spec.HolderIdentity = ptr.To("")
	_, err = cs.CoordinationV1().Leases("ns").Update(ctx, l, metav1.UpdateOptions{})
	require.NoError(t, err)
	deadline := time.After(10 * time.Second)
	for {
		clk.Step(100 * time.Millisecond)
		select {
		case r := <-ch:
			require.NoError(t, r.err)
			require.NoError(t, r.l.Resign(ctx))
			return
		case <-time.After(50 * time.Millisecond):
		case <-deadline:
			require.FailNow(t, "the follower did not take the released lease by polling")
		}
	}
}

// waitFor returns a channel closed once cond holds, checked every
// millisecond for up to a second.
func waitFor(cond func() bool) <-chan struct{} {
	ch := make(chan struct{})
	go func() {
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for range 1000 {
			if cond() {
				close(ch)
				return
			}
			<-tick.C
		}
	}()
	return ch
}
