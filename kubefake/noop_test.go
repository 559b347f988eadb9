package kubefake_test

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/reconkit/reconkit/kubefake"
)

// An update or patch that changes nothing writes nothing, as on the
// apiserver: the answer is the stored object at its resourceVersion, and
// watchers see no event. A write that changes something does both.
func TestNoOpWriteKeepsResourceVersion(t *testing.T) {
	ctx := context.Background()
	cs := kubefake.NewClientset(cm("c", map[string]string{"k": "v"}))
	cms := cs.CoreV1().ConfigMaps(ns)
	c, err := cms.Get(ctx, "c", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := cms.Watch(ctx, metav1.ListOptions{ResourceVersion: c.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()

	same, err := cms.Update(ctx, c.DeepCopy(), metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if same.ResourceVersion != c.ResourceVersion {
		t.Fatalf("a no-op update moved the resourceVersion from %s to %s", c.ResourceVersion, same.ResourceVersion)
	}
	unconditional := c.DeepCopy()
	unconditional.ResourceVersion = ""
	if same, err = cms.Update(ctx, unconditional, metav1.UpdateOptions{}); err != nil || same.ResourceVersion != c.ResourceVersion {
		t.Fatalf("a no-op unconditional update: %v, resourceVersion %s, want %s", err, same.ResourceVersion, c.ResourceVersion)
	}
	if same, err = cms.Patch(ctx, "c", types.MergePatchType, []byte(`{"metadata":{"labels":{"k":"v"}}}`), metav1.PatchOptions{}); err != nil || same.ResourceVersion != c.ResourceVersion {
		t.Fatalf("a no-op patch: %v, resourceVersion %s, want %s", err, same.ResourceVersion, c.ResourceVersion)
	}

	changed := c.DeepCopy()
	changed.Labels["k"] = "w"
	got, err := cms.Update(ctx, changed, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.ResourceVersion == c.ResourceVersion {
		t.Fatal("an update that changed a label kept its resourceVersion")
	}
	select {
	case ev := <-w.ResultChan():
		m, _ := ev.Object.(metav1.Object)
		if ev.Type != watch.Modified || m == nil || m.GetResourceVersion() != got.ResourceVersion {
			t.Fatalf("first event after the no-op writes: %s at %v, want MODIFIED at %s (the change)", ev.Type, m, got.ResourceVersion)
		}
	case <-time.After(time.Minute):
		t.Fatal("no event for the update that changed a label")
	}
}
