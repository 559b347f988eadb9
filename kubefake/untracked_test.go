package kubefake_test

import (
	"context"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/reconkit/reconkit/kubefake"
)

// A resource named in UntrackedFields keeps no managedFields through
// create, update and patch, whatever a client sends; every other resource
// is tracked as before. Everything else of a write is as it was: the
// resourceVersion precondition, the answer, the object stored.
func TestUntrackedFieldsKeepNoManagedFields(t *testing.T) {
	ctx := context.Background()
	c := kubefake.Config{UntrackedFields: []schema.GroupResource{{Group: "coordination.k8s.io", Resource: "leases"}}}.NewServer().NewClient()
	leases := c.CoordinationV1().Leases("ns")
	l, err := leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "l", Labels: map[string]string{"app": "x"}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("x")}}, metav1.CreateOptions{FieldManager: "agent"})
	if err != nil {
		t.Fatal(err)
	}
	if len(l.ManagedFields) != 0 {
		t.Errorf("created untracked lease has managedFields %v", l.ManagedFields)
	}
	stale := l.DeepCopy()
	l.Spec.HolderIdentity = ptr.To("a")
	l.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "sent", Operation: metav1.ManagedFieldsOperationUpdate,
		APIVersion: "coordination.k8s.io/v1", FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:spec":{"f:holderIdentity":{}}}`)}}
	if l, err = leases.Update(ctx, l, metav1.UpdateOptions{FieldManager: "agent"}); err != nil {
		t.Fatal(err)
	}
	if len(l.ManagedFields) != 0 || ptr.Deref(l.Spec.HolderIdentity, "") != "a" {
		t.Errorf("updated untracked lease: holder %v, managedFields %v", ptr.Deref(l.Spec.HolderIdentity, ""), l.ManagedFields)
	}
	stale.Spec.HolderIdentity = ptr.To("b")
	if _, err := leases.Update(ctx, stale, metav1.UpdateOptions{}); err == nil {
		t.Error("a stale update of an untracked lease succeeded")
	}
	p, err := leases.Patch(ctx, "l", types.MergePatchType, []byte(`{"spec":{"leaseDurationSeconds":10}}`), metav1.PatchOptions{FieldManager: "agent"})
	if err != nil {
		t.Fatal(err)
	}
	if len(p.ManagedFields) != 0 || ptr.Deref(p.Spec.LeaseDurationSeconds, 0) != 10 {
		t.Errorf("patched untracked lease: duration %v, managedFields %v", ptr.Deref(p.Spec.LeaseDurationSeconds, 0), p.ManagedFields)
	}
	got, err := leases.Get(ctx, "l", metav1.GetOptions{})
	if err != nil || len(got.ManagedFields) != 0 || got.ResourceVersion != p.ResourceVersion {
		t.Errorf("stored untracked lease: %v, err %v", got, err)
	}

	cm, err := c.CoreV1().ConfigMaps("ns").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c"}, Data: map[string]string{"a": "1"}},
		metav1.CreateOptions{FieldManager: "agent"})
	if err != nil {
		t.Fatal(err)
	}
	if len(cm.ManagedFields) != 1 || cm.ManagedFields[0].Manager != "agent" {
		t.Errorf("a tracked resource beside an untracked one: managedFields %v", cm.ManagedFields)
	}
}
