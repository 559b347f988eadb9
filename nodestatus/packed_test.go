package nodestatus

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestPackLeaseReusesStorage(t *testing.T) {
	l := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{
			Name: "n", Namespace: "kube-node-lease", ResourceVersion: "100", UID: "u",
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "m"}},
		},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("n"), RenewTime: &metav1.MicroTime{Time: time.Unix(1, 0)}},
	}
	buf := packLease(nil, l)
	require.NotNil(t, buf)
	require.Len(t, l.ManagedFields, 1, "the caller's lease is left as it was")
	got := unpackLease(buf)
	require.Empty(t, got.ManagedFields, "managed fields are not kept")
	require.Equal(t, "100", got.ResourceVersion)

	// A renewal's answer, a little longer, is packed into the same storage.
	l.ResourceVersion = "1000"
	l.Spec.RenewTime = &metav1.MicroTime{Time: time.Unix(2, 5000)}
	again := packLease(buf, l)
	require.Same(t, &buf[:1][0], &again[:1][0], "no new allocation per renewal")
	got = unpackLease(again)
	require.Equal(t, "1000", got.ResourceVersion)
	require.True(t, got.Spec.RenewTime.Equal(l.Spec.RenewTime))
	require.Nil(t, unpackLease(nil))
}

func TestPackNodeKeepsWhatWritesUse(t *testing.T) {
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: "n", UID: "u", ResourceVersion: "7",
			Labels: map[string]string{"a": "1"}, Annotations: map[string]string{AnnotationLastApplied: "{}"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "m"}},
		},
		Spec:   corev1.NodeSpec{Taints: []corev1.Taint{{Key: "t", Effect: corev1.TaintEffectNoSchedule}}},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Unix(5, 0)}}},
	}
	p := packNode(n, false)
	got := p.unpack()
	require.Equal(t, n.UID, p.uid)
	require.Equal(t, n.Labels, got.Labels)
	require.Equal(t, n.Annotations, got.Annotations)
	require.Equal(t, "7", got.ResourceVersion)
	require.Equal(t, n.Status, got.Status)
	require.Empty(t, got.ManagedFields)
	require.Empty(t, got.Spec.Taints, "the served Node's spec is not kept")
	require.Equal(t, n.Spec, packNode(n, true).unpack().Spec, "the provider's is")
	require.NotSame(t, p.unpack(), p.unpack(), "each use gets its own copy")
}
