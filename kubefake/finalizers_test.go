package kubefake_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/reconkit/reconkit/kubefake"
)

// The write that removes the last finalizer of an object being deleted
// is not stored: the object is deleted as it was, so a watch sees one
// DELETED event carrying the finalizers it had, and the writer gets its
// own object back at the resourceVersion it sent.
func TestLastFinalizerDeletesAsStored(t *testing.T) {
	cs := kubefake.NewClientset()
	ctx := context.Background()
	cms := cs.CoreV1().ConfigMaps(ns)
	c := cm("f", nil)
	c.Finalizers = []string{"example.com/hold"}
	if _, err := cms.Create(ctx, c, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cms.Delete(ctx, "f", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	marked, err := cms.Get(ctx, "f", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := cms.Watch(ctx, metav1.ListOptions{ResourceVersion: marked.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	done := marked.DeepCopy()
	done.Finalizers = nil
	got, err := cms.Update(ctx, done, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.ResourceVersion != marked.ResourceVersion {
		t.Fatalf("answer at rv %s, want the rv sent, %s", got.ResourceVersion, marked.ResourceVersion)
	}
	ev := nextEvent(t, w)
	gone := ev.Object.(*corev1.ConfigMap)
	if ev.Type != watch.Deleted || len(gone.Finalizers) != 1 || rvOf(t, gone.ResourceVersion) <= rvOf(t, marked.ResourceVersion) {
		t.Fatalf("event %s with finalizers %v at rv %s; want DELETED with the stored finalizers after rv %s",
			ev.Type, gone.Finalizers, gone.ResourceVersion, marked.ResourceVersion)
	}
}

// A pod whose grace period still runs is not deleted when its last
// finalizer goes: it waits for a delete with a zero period.
func TestPodInGraceOutlivesItsFinalizers(t *testing.T) {
	cs := kubefake.NewClientset()
	ctx := context.Background()
	pods := cs.CoreV1().Pods(ns)
	p := pod("p", "node-1")
	p.Finalizers = []string{"example.com/hold"}
	if _, err := pods.Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := pods.Delete(ctx, "p", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := pods.Patch(ctx, "p", types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := pods.Get(ctx, "p", metav1.GetOptions{}); err != nil {
		t.Fatalf("pod in its grace period: %v, want it kept", err)
	}
	zero := int64(0)
	if err := pods.Delete(ctx, "p", metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
	if _, err := pods.Get(ctx, "p", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("after a delete with grace 0: %v, want NotFound", err)
	}
}
