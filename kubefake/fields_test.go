package kubefake_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/reconkit/reconkit/kubefake"
)

// Field selectors on the fields a resource selects on are applied to
// lists and watches; any other field is refused with 400, as the
// apiserver refuses it, never answered with an empty list.
func TestFieldSelectors(t *testing.T) {
	cs := kubefake.NewClientset()
	ctx := context.Background()
	pods := cs.CoreV1().Pods(ns)
	for _, p := range []*corev1.Pod{pod("a", "node-1"), pod("b", "node-2"), pod("c", "node-1")} {
		if _, err := pods.Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		sel  string
		want int
	}{
		{"spec.nodeName=node-1", 2},
		{"spec.host=node-2", 1}, // the old name, as the apiserver still accepts it
		{"spec.nodeName!=node-1,metadata.name!=a", 1},
		{"status.phase=Running", 0},
		{"spec.hostNetwork=false", 3},
	} {
		list, err := pods.List(ctx, metav1.ListOptions{FieldSelector: tc.sel})
		if err != nil || len(list.Items) != tc.want {
			t.Fatalf("pods with %s: %d, %v; want %d", tc.sel, len(list.Items), err, tc.want)
		}
	}
	for _, tc := range []struct {
		what string
		err  error
	}{
		{"pods by an unknown field", func() error {
			_, err := pods.List(ctx, metav1.ListOptions{FieldSelector: "spec.priority=1"})
			return err
		}()},
		{"configmaps by a pod's field", func() error {
			_, err := cs.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=node-1"})
			return err
		}()},
		{"nodes by namespace", func() error {
			_, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{FieldSelector: "metadata.namespace=x"})
			return err
		}()},
		{"a watch by an unknown field", func() error {
			_, err := pods.Watch(ctx, metav1.ListOptions{FieldSelector: "spec.priority=1"})
			return err
		}()},
	} {
		if !apierrors.IsBadRequest(tc.err) {
			t.Fatalf("%s: %v, want 400", tc.what, tc.err)
		}
	}

	// A watch on spec.nodeName sees a pod bound to its node.
	list, _ := pods.List(ctx, metav1.ListOptions{})
	w, err := pods.Watch(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=node-3", ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	if _, err := pods.Create(ctx, pod("d", "node-3"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := pods.Create(ctx, pod("e", "node-1"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := pods.Delete(ctx, "d", metav1.DeleteOptions{}); err != nil { // bound: graceful
		t.Fatal(err)
	}
	for _, want := range []watch.EventType{watch.Added, watch.Modified} {
		ev := nextEvent(t, w)
		if p := ev.Object.(*corev1.Pod); ev.Type != want || p.Name != "d" {
			t.Fatalf("event %s %s, want %s d", ev.Type, p.Name, want)
		}
	}
}

// Secrets select on their type and nodes on spec.unschedulable.
func TestFieldSelectorsOfOtherKinds(t *testing.T) {
	cs := kubefake.NewClientset(
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tls"}, Type: corev1.SecretTypeTLS},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "plain"}, Type: corev1.SecretTypeOpaque},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Spec: corev1.NodeSpec{Unschedulable: true}},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n2"}},
	)
	ctx := context.Background()
	s, err := cs.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{FieldSelector: "type=kubernetes.io/tls"})
	if err != nil || len(s.Items) != 1 || s.Items[0].Name != "tls" {
		t.Fatalf("secrets of type tls: %v, %v", s, err)
	}
	n, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{FieldSelector: "spec.unschedulable=false"})
	if err != nil || len(n.Items) != 1 || n.Items[0].Name != "n2" {
		t.Fatalf("schedulable nodes: %v, %v", n, err)
	}
}
