package lease

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	k8stesting "k8s.io/client-go/testing"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/reconkit/reconkit/kubefake"
)

// The write that takes an expired lease carries the resourceVersion the
// candidate read: when a rival takes the lease first, between that read
// and this write, the write fails with a conflict and the candidate does
// not lead; it reads the Lease again and waits for the rival's term. Every
// wait has a deadline, so a candidate that leads anyway fails the test
// instead of hanging it.
func TestAcquisitionLosesToARivalThatWroteFirst(t *testing.T) {
	clk := testingclock.NewFakeClock(epoch)
	stamp := metav1.NewMicroTime(epoch.Add(-time.Hour)) // another host's clock: ignored
	cs := kubefake.Config{Clock: clk}.NewClientset(&coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "lease"},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity: ptr.To("old"), LeaseDurationSeconds: ptr.To[int32](3),
			AcquireTime: &stamp, RenewTime: &stamp, LeaseTransitions: ptr.To[int32](4),
		},
	})
	// The candidate's watch delivers nothing: it does not see the rival's
	// write before its own.
	cs.PrependWatchReactor("leases", func(k8stesting.Action) (bool, watch.Interface, error) {
		return true, watch.NewFake(), nil
	})
	f := newFakeLease(t, cs, clk)
	closeOnCleanup(t, f)
	ctx, cancel := context.WithTimeout(context.Background(), recvDeadline)
	defer cancel()
	ch := campaignAsync(ctx, f.Elector)
	require.Eventually(t, func() bool { return leaseWatches(cs) > 0 && clk.HasWaiters() }, 10*time.Second, time.Millisecond, "the candidate waits for the old holder's lease")

	// The rival takes the lease; the candidate does not see it.
	l, err := cs.CoordinationV1().Leases("ns").Get(ctx, "lease", metav1.GetOptions{})
	require.NoError(t, err)
	taken := metav1.NewMicroTime(epoch.Add(-time.Hour + 3*time.Second))
	l.Spec.HolderIdentity, l.Spec.AcquireTime, l.Spec.RenewTime = ptr.To("rival"), &taken, &taken
	l.Spec.LeaseTransitions = ptr.To[int32](5)
	_, err = cs.CoordinationV1().Leases("ns").Update(ctx, l, metav1.UpdateOptions{})
	require.NoError(t, err)

	// The old holder's lease expires by the candidate's clock: it writes
	// with the resourceVersion it read, gets a conflict, reads again and
	// finds the rival's term.
	clk.SetTime(epoch.Add(3 * time.Second))
	deadline := time.After(10 * time.Second)
	for f.snapshot().rec.Holder != "rival" {
		select {
		case r := <-ch:
			require.FailNow(t, "the candidate led over the rival's write", "%+v", r)
		case <-time.After(time.Millisecond):
		case <-deadline:
			require.FailNow(t, "the candidate never read the rival's term")
		}
	}
	select {
	case r := <-ch:
		require.FailNow(t, "the candidate led over the rival's write", "%+v", r)
	case <-time.After(100 * time.Millisecond):
	}
	got, err := cs.CoordinationV1().Leases("ns").Get(ctx, "lease", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "rival", ptr.Deref(got.Spec.HolderIdentity, ""), "holder")
	cancel()
	select {
	case r := <-ch:
		require.Error(t, r.err, "the campaign ended with its context")
	case <-time.After(10 * time.Second):
		require.FailNow(t, "Campaign did not return after its context ended")
	}
}
