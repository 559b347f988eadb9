package lease

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/reconkit/reconkit/election"
)

// TestLeaderReadsOnceAndJudgesByItsOwnClock holds Leader to its promises:
// one linearizable GET per call (resourceVersion unset, never a cache); a
// holder whose record carries stale timestamps from another host's clock
// still leads until this candidate has seen the record unchanged for the
// lease duration; ErrNoLeader for an expired, released or missing Lease;
// other read errors returned wrapped, not as ErrNoLeader.
func TestLeaderReadsOnceAndJudgesByItsOwnClock(t *testing.T) {
	clk := testingclock.NewFakeClock(epoch)
	other, dur, trans := "other", int32(3), int32(4)
	stamp := metav1.NewMicroTime(epoch.Add(-time.Hour)) // another host's clock: ignored
	cs := fake.NewClientset(&coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "lease"},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity: &other, LeaseDurationSeconds: &dur, LeaseTransitions: &trans,
			AcquireTime: &stamp, RenewTime: &stamp,
		},
	})
	f := newFakeLease(t, cs, clk)
	ctx, cancel := context.WithTimeout(context.Background(), recvDeadline)
	defer cancel()
	leases := cs.CoordinationV1().Leases("ns")

	gets := func() []k8stesting.GetActionImpl {
		var out []k8stesting.GetActionImpl
		for _, a := range cs.Actions() {
			if g, ok := a.(k8stesting.GetActionImpl); ok && a.GetResource().Resource == "leases" && a.GetVerb() == "get" {
				out = append(out, g)
			}
		}
		return out
	}

	// First sight of a record stamped an hour ago: the holder still leads.
	info, err := f.Leader(ctx)
	require.NoError(t, err, "first read of a stale Lease")
	require.Equal(t, "other", info.Identity)
	require.Equal(t, election.Token(5), info.Token&0xffffffff, "leaseTransitions 4, token = transitions + 1")
	g := gets()
	require.Len(t, g, 1, "Leader reads the Lease once")
	require.Empty(t, g[0].GetGetOptions().ResourceVersion, "Leader's GET is linearizable: resourceVersion unset")

	// Unchanged, just short of the lease duration by our clock: still leads.
	clk.SetTime(epoch.Add(3*time.Second - time.Millisecond))
	info, err = f.Leader(ctx)
	require.NoError(t, err)
	require.Equal(t, "other", info.Identity, "holder counted as expired before the lease duration passed on our clock")

	// Unchanged for the lease duration: expired, nobody leads.
	clk.SetTime(epoch.Add(3 * time.Second))
	_, err = f.Leader(ctx)
	require.ErrorIs(t, err, election.ErrNoLeader, "expired holder still reported")
	require.Len(t, gets(), 3, "one GET per Leader call")

	// The holder renews: the record changed, so it leads again from now.
	lease, err := leases.Get(ctx, "lease", metav1.GetOptions{})
	require.NoError(t, err)
	renewed := metav1.NewMicroTime(stamp.Add(5 * time.Second))
	lease.Spec.RenewTime = &renewed
	_, err = leases.Update(ctx, lease, metav1.UpdateOptions{})
	require.NoError(t, err)
	info, err = f.Leader(ctx)
	require.NoError(t, err, "renewed holder")
	require.Equal(t, "other", info.Identity)

	// Released (holderIdentity empty): nobody leads, at once.
	lease, err = leases.Get(ctx, "lease", metav1.GetOptions{})
	require.NoError(t, err)
	empty := ""
	lease.Spec.HolderIdentity = &empty
	_, err = leases.Update(ctx, lease, metav1.UpdateOptions{})
	require.NoError(t, err)
	_, err = f.Leader(ctx)
	require.ErrorIs(t, err, election.ErrNoLeader, "released Lease")

	// Deleted: nobody leads.
	require.NoError(t, leases.Delete(ctx, "lease", metav1.DeleteOptions{}))
	_, err = f.Leader(ctx)
	require.ErrorIs(t, err, election.ErrNoLeader, "missing Lease")

	// Any other read error is returned wrapped, never as "no leader".
	boom := errors.New("boom")
	cs.PrependReactor("get", "leases", func(k8stesting.Action) (bool, runtime.Object, error) { return true, nil, boom })
	_, err = f.Leader(ctx)
	require.ErrorIs(t, err, boom)
	require.NotErrorIs(t, err, election.ErrNoLeader)
}
