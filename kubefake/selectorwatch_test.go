package kubefake_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/reconkit/reconkit/kubefake"
)

// A watch with a label selector sees an object that stops matching as
// DELETED and one that comes to match as ADDED, as the apiserver's watch
// cache sends them; a change that never matches is not sent.
func TestWatchSelectorEntryAndExit(t *testing.T) {
	cs := kubefake.NewClientset(cm("a", map[string]string{"app": "x"}))
	ctx := context.Background()
	cms := cs.CoreV1().ConfigMaps(ns)
	list, err := cms.List(ctx, metav1.ListOptions{LabelSelector: "app=x"})
	if err != nil {
		t.Fatal(err)
	}
	w, err := cms.Watch(ctx, metav1.ListOptions{LabelSelector: "app=x", ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	relabel := func(name, app string) *corev1.ConfigMap {
		t.Helper()
		c, err := cms.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		c.Labels = map[string]string{"app": app}
		c.Data = map[string]string{"v": c.ResourceVersion} // a change even when the label stays
		c, err = cms.Update(ctx, c, metav1.UpdateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	if _, err := cms.Create(ctx, cm("b", map[string]string{"app": "y"}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	relabel("b", "z")           // never matches: not sent
	left := relabel("a", "y")   // stops matching
	came := relabel("b", "x")   // comes to match
	stayed := relabel("b", "x") // a change that keeps matching
	for _, want := range []struct {
		typ  watch.EventType
		name string
		rv   string
		app  string
	}{
		{watch.Deleted, "a", left.ResourceVersion, "x"}, // its last matching state, at the change's resourceVersion
		{watch.Added, "b", came.ResourceVersion, "x"},
		{watch.Modified, "b", stayed.ResourceVersion, "x"},
	} {
		ev := nextEvent(t, w)
		got := ev.Object.(*corev1.ConfigMap)
		if ev.Type != want.typ || got.Name != want.name || got.ResourceVersion != want.rv || got.Labels["app"] != want.app {
			t.Fatalf("event %s %s rv %s app=%s, want %s %s rv %s app=%s", ev.Type, got.Name, got.ResourceVersion, got.Labels["app"], want.typ, want.name, want.rv, want.app)
		}
	}
}
