package kubestore_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/reconkit/reconkit/kubefake"
)

// With records on node Leases, PublishRecord reports the node Lease's
// duration as RecordLease.Granted, whatever RecordTTL the gate asked for:
// the gate takes its margin from it (TestMarginFromTheGrantedLease in the
// root package), the margin the reaper adds to the same duration, so the
// slack is twice a tenth of the node Lease's duration (8s with 40s
// Leases), not a tenth of RecordTTL plus a tenth of it.
func TestNodeLeaseGateMarginFromTheNodeLease(t *testing.T) {
	ctx := testCtx(t)
	cs := kubefake.NewClientset()
	clk := newFakeClock()
	nl, err := cs.CoordinationV1().Leases(nodeLeaseNamespace).Create(ctx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "n1"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("n1"), LeaseDurationSeconds: ptr.To[int32](40),
			RenewTime: &metav1.MicroTime{Time: clk.Now()}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	sent := clk.Now()
	st := newNodeLeaseStore(t, cs, "margin", clk, func(string) (time.Time, types.UID, bool) { return sent, nl.UID, true })
	clk.Step(10 * time.Second)
	l, err := st.PublishRecord(ctx, "n1", []byte("v"), 10*time.Second)
	require.NoError(t, err)
	require.Equal(t, 30*time.Second, l.TTL, "left from the last send")
	require.Equal(t, 40*time.Second, l.Granted, "the node Lease's duration")
}
