package kubefake_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/reconkit/reconkit/kubefake"
)

// Deleting a pod bound to a node sets its deletionTimestamp to now plus
// its grace period and keeps it, as the apiserver does for the kubelet
// to stop it; a later delete may only shorten the period, and one of
// zero removes it.
func TestGracefulPodDeletion(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakePassiveClock(now)
	cs := kubefake.Config{Clock: clk}.NewClientset()
	ctx := context.Background()
	pods := cs.CoreV1().Pods(ns)
	bound := pod("bound", "node-1")
	bound.Spec.TerminationGracePeriodSeconds = ptr.To[int64](40)
	if _, err := pods.Create(ctx, bound, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := pods.Create(ctx, pod("defaulted", "node-1"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	check := func(name string, grace int64) *corev1.Pod {
		t.Helper()
		p, err := pods.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("%s after a graceful delete: %v, want it kept", name, err)
		}
		if p.DeletionTimestamp == nil || !p.DeletionTimestamp.Time.Equal(now.Add(time.Duration(grace)*time.Second)) ||
			p.DeletionGracePeriodSeconds == nil || *p.DeletionGracePeriodSeconds != grace {
			t.Fatalf("%s: deletionTimestamp %v grace %v, want now+%ds and %d", name, p.DeletionTimestamp, p.DeletionGracePeriodSeconds, grace, grace)
		}
		return p
	}
	if err := pods.Delete(ctx, "bound", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	marked := check("bound", 40)
	if err := pods.Delete(ctx, "defaulted", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	check("defaulted", 30)
	// A longer or equal period, or none, changes nothing.
	for _, g := range []*int64{nil, ptr.To[int64](40), ptr.To[int64](90)} {
		if err := pods.Delete(ctx, "bound", metav1.DeleteOptions{GracePeriodSeconds: g}); err != nil {
			t.Fatal(err)
		}
	}
	if p := check("bound", 40); p.ResourceVersion != marked.ResourceVersion {
		t.Fatalf("a delete that shortens nothing wrote rv %s over %s", p.ResourceVersion, marked.ResourceVersion)
	}
	if err := pods.Delete(ctx, "bound", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](10)}); err != nil {
		t.Fatal(err)
	}
	check("bound", 10)
	if err := pods.Delete(ctx, "bound", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
	}
	if _, err := pods.Get(ctx, "bound", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("after a delete with grace 0: %v, want NotFound", err)
	}
}

// A pod bound to no node, or terminated, is deleted at once, after a
// write that marks it: a watch sees MODIFIED (with a deletionTimestamp
// and a zero grace period), then DELETED.
func TestUngracefulPodDeletion(t *testing.T) {
	cs := kubefake.NewClientset()
	ctx := context.Background()
	pods := cs.CoreV1().Pods(ns)
	done := pod("done", "node-1")
	done.Status.Phase = corev1.PodSucceeded
	for _, p := range []*corev1.Pod{pod("pending", ""), done} {
		if _, err := pods.Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	list, _ := pods.List(ctx, metav1.ListOptions{})
	w, err := pods.Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	for _, name := range []string{"pending", "done"} {
		if err := pods.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := pods.Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Fatalf("%s: %v, want NotFound", name, err)
		}
		ev := nextEvent(t, w)
		p := ev.Object.(*corev1.Pod)
		if ev.Type != watch.Modified || p.DeletionTimestamp == nil || p.DeletionGracePeriodSeconds == nil || *p.DeletionGracePeriodSeconds != 0 {
			t.Fatalf("%s: first event %s with deletionTimestamp %v, want MODIFIED marked for deletion", name, ev.Type, p.DeletionTimestamp)
		}
		if ev := nextEvent(t, w); ev.Type != watch.Deleted {
			t.Fatalf("%s: second event %s, want DELETED", name, ev.Type)
		}
	}
}

// A pod whose finalizer holds it is marked, not removed, even with a
// zero grace period.
func TestPodDeletionWaitsForFinalizers(t *testing.T) {
	cs := kubefake.NewClientset()
	ctx := context.Background()
	pods := cs.CoreV1().Pods(ns)
	p := pod("held", "")
	p.Finalizers = []string{"example.com/hold"}
	if _, err := pods.Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := pods.Delete(ctx, "held", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err := pods.Get(ctx, "held", metav1.GetOptions{})
	if err != nil || got.DeletionTimestamp == nil {
		t.Fatalf("held pod: %v, %v; want it kept and marked", got, err)
	}
}
