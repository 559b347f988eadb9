package kubefake_test

import (
	"context"
	"strings"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/reconkit/reconkit/kubefake"
)

// A Lease cannot be updated without a resourceVersion: the apiserver's
// Lease strategy refuses unconditional updates with 422, where a
// ConfigMap's or a Node's accepts them.
func TestLeaseRefusesUnconditionalUpdate(t *testing.T) {
	ctx := context.Background()
	cs := kubefake.NewClientset(
		&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "l"}},
		cm("c", nil),
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}},
	)
	l, err := cs.CoordinationV1().Leases(ns).Get(ctx, "l", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	l.ResourceVersion = ""
	l.Spec.HolderIdentity = ptr.To("me")
	_, err = cs.CoordinationV1().Leases(ns).Update(ctx, l, metav1.UpdateOptions{})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "must be specified for an update") {
		t.Fatalf("unconditional lease update: %v, want 422 naming metadata.resourceVersion", err)
	}
	if got, _ := cs.CoordinationV1().Leases(ns).Get(ctx, "l", metav1.GetOptions{}); got.Spec.HolderIdentity != nil {
		t.Fatalf("the refused update was stored: holder %q", *got.Spec.HolderIdentity)
	}

	c, _ := cs.CoreV1().ConfigMaps(ns).Get(ctx, "c", metav1.GetOptions{})
	c.ResourceVersion = ""
	if _, err := cs.CoreV1().ConfigMaps(ns).Update(ctx, c, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("unconditional configmap update: %v", err)
	}
	n, _ := cs.CoreV1().Nodes().Get(ctx, "n", metav1.GetOptions{})
	n.ResourceVersion = ""
	if _, err := cs.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("unconditional node update: %v", err)
	}
}
