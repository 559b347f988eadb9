package kubefake_test

import (
	"context"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/reconkit/reconkit/kubefake"
)

// An update that carries a uid updates only the object with that uid:
// one deleted and created again under the same name is another object,
// and the update is refused with 409, as the apiserver refuses it.
func TestUpdateUIDIsAPrecondition(t *testing.T) {
	cs := kubefake.NewClientset()
	ctx := context.Background()
	cms := cs.CoreV1().ConfigMaps(ns)
	old, err := cms.Create(ctx, cm("a", nil), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := cms.Delete(ctx, "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	again, err := cms.Create(ctx, cm("a", nil), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	stale := again.DeepCopy()
	stale.UID = old.UID // the same resourceVersion, the old object's uid
	stale.Data = map[string]string{"k": "v"}
	if _, err := cms.Update(ctx, stale, metav1.UpdateOptions{}); !apierrors.IsConflict(err) {
		t.Fatalf("update with another object's uid: %v, want 409", err)
	}
	stale.UID = "" // no uid: no precondition
	if _, err := cms.Update(ctx, stale, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("update without a uid: %v", err)
	}
	// A patch that changes the uid is refused by validation.
	if _, err := cms.Patch(ctx, "a", types.MergePatchType, []byte(`{"metadata":{"uid":"`+string(old.UID)+`"}}`), metav1.PatchOptions{}); !apierrors.IsInvalid(err) {
		t.Fatalf("patch of the uid: %v, want 422", err)
	}
}

// No finalizer can be added to an object that is being deleted: 422, as
// the apiserver's metadata validation answers. Removing one still works.
func TestNoNewFinalizerWhileDeleting(t *testing.T) {
	cs := kubefake.NewClientset()
	ctx := context.Background()
	cms := cs.CoreV1().ConfigMaps(ns)
	c := cm("f", nil)
	c.Finalizers = []string{"example.com/a", "example.com/b"}
	if _, err := cms.Create(ctx, c, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cms.Delete(ctx, "f", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err := cms.Get(ctx, "f", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if g := got.DeletionGracePeriodSeconds; g == nil || *g != 0 {
		t.Fatalf("deletionGracePeriodSeconds %v, want 0 as the apiserver marks it", g)
	}
	add := got.DeepCopy()
	add.Finalizers = append(add.Finalizers, "example.com/c")
	if _, err := cms.Update(ctx, add, metav1.UpdateOptions{}); !apierrors.IsInvalid(err) {
		t.Fatalf("update adding a finalizer while deleting: %v, want 422", err)
	}
	if _, err := cms.Patch(ctx, "f", types.MergePatchType, []byte(`{"metadata":{"finalizers":["example.com/a","example.com/c"]}}`), metav1.PatchOptions{}); !apierrors.IsInvalid(err) {
		t.Fatalf("patch swapping a finalizer while deleting: %v, want 422", err)
	}
	drop := got.DeepCopy()
	drop.Finalizers = drop.Finalizers[:1]
	if _, err := cms.Update(ctx, drop, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("removing a finalizer while deleting: %v", err)
	}
}

// A patch that changes nothing writes nothing, as on the apiserver: the
// answer keeps the resourceVersion and no watch event is sent, although
// the patch's round trip changes the managedFields' timestamps.
func TestNoopPatchKeepsResourceVersion(t *testing.T) {
	cs := kubefake.NewClientset()
	ctx := context.Background()
	cms := cs.CoreV1().ConfigMaps(ns)
	c := cm("a", map[string]string{"app": "x"})
	c.Finalizers = []string{"example.com/a"}
	created, err := cms.Create(ctx, c, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{`{"metadata":{"labels":{"app":"x"}}}`, `{"metadata":{"finalizers":["example.com/a"]}}`} {
		got, err := cms.Patch(ctx, "a", types.MergePatchType, []byte(p), metav1.PatchOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got.ResourceVersion != created.ResourceVersion {
			t.Fatalf("no-op patch %s: rv %s, want %s kept", p, got.ResourceVersion, created.ResourceVersion)
		}
	}
}
