package kubefake_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/reconkit/reconkit/kubefake"
)

// List answers with the resourceVersion of the newest write, whatever the
// resource written: one counter, as etcd's revision.
func TestListCarriesCurrentResourceVersion(t *testing.T) {
	cs := kubefake.NewClientset()
	ctx := context.Background()
	if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, cm("a", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	sec, err := cs.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "s"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	list, err := cs.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if list.ResourceVersion != sec.ResourceVersion {
		t.Fatalf("list of configmaps at rv %q, want the newest write's %q (a secret)", list.ResourceVersion, sec.ResourceVersion)
	}
}

// What the apiserver sets on create is its own: a uid or creationTimestamp
// the client sent is replaced.
func TestCreateIgnoresClientMetadata(t *testing.T) {
	clk := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	cs := kubefake.Config{Clock: clocktesting.NewFakePassiveClock(clk)}.NewClientset()
	in := cm("a", nil)
	in.UID = "chosen-by-the-client"
	in.CreationTimestamp = metav1.NewTime(clk.Add(-time.Hour))
	got, err := cs.CoreV1().ConfigMaps(ns).Create(context.Background(), in, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.UID == "" || got.UID == in.UID {
		t.Fatalf("uid %q, want one the server chose", got.UID)
	}
	if !got.CreationTimestamp.Time.Equal(clk) {
		t.Fatalf("creationTimestamp %v, want the server's %v", got.CreationTimestamp, clk)
	}
}

// A watch applies its field selector (metadata.name) and its namespace.
func TestWatchSelectsByNameAndNamespace(t *testing.T) {
	cs := kubefake.NewClientset()
	ctx := context.Background()
	w, err := cs.CoreV1().ConfigMaps(ns).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=b"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	for _, n := range []struct{ ns, name string }{{ns, "a"}, {"elsewhere", "b"}, {ns, "b"}} {
		if _, err := cs.CoreV1().ConfigMaps(n.ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: n.ns, Name: n.name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	ev := nextEvent(t, w)
	if got := ev.Object.(*corev1.ConfigMap); ev.Type != watch.Added || got.Namespace != ns || got.Name != "b" {
		t.Fatalf("first event %s %s/%s, want ADDED %s/b", ev.Type, got.Namespace, got.Name, ns)
	}
}
