package kubefake_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/reconkit/reconkit/kubefake"
)

const ns = "default"

func cm(name string, labels map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels}}
}

func rvOf(t *testing.T, s string) uint64 {
	t.Helper()
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		t.Fatalf("resourceVersion %q is not a number", s)
	}
	return n
}

func TestCreateStampsMetadata(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 1, 2, 3, 4, 5, 600, time.UTC))
	cs := kubefake.Config{Clock: clk}.NewClientset()
	ctx := context.Background()
	got, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, cm("a", nil), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.ResourceVersion == "" || got.UID == "" {
		t.Fatalf("create returned rv %q uid %q; want both set", got.ResourceVersion, got.UID)
	}
	if want := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC); !got.CreationTimestamp.Time.Equal(want) {
		t.Fatalf("creationTimestamp %v, want %v", got.CreationTimestamp, want)
	}
	withRV := cm("b", nil)
	withRV.ResourceVersion = "7"
	if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, withRV, metav1.CreateOptions{}); !apierrors.IsBadRequest(err) {
		t.Fatalf("create with a resourceVersion: %v, want 400", err)
	}
	if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, cm("a", nil), metav1.CreateOptions{}); !apierrors.IsAlreadyExists(err) {
		t.Fatalf("second create: %v, want AlreadyExists", err)
	}
}

func TestUpdatePrecondition(t *testing.T) {
	cs := kubefake.NewClientset(cm("a", nil))
	ctx := context.Background()
	cms := cs.CoreV1().ConfigMaps(ns)
	old, err := cms.Get(ctx, "a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	first := old.DeepCopy()
	first.Data = map[string]string{"k": "1"}
	updated, err := cms.Update(ctx, first, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rvOf(t, updated.ResourceVersion) <= rvOf(t, old.ResourceVersion) {
		t.Fatalf("update kept resourceVersion %s (was %s)", updated.ResourceVersion, old.ResourceVersion)
	}
	stale := old.DeepCopy()
	stale.Data = map[string]string{"k": "2"}
	if _, err := cms.Update(ctx, stale, metav1.UpdateOptions{}); !apierrors.IsConflict(err) {
		t.Fatalf("stale update: %v, want 409", err)
	}
	uncond := old.DeepCopy()
	uncond.ResourceVersion = ""
	uncond.Data = map[string]string{"k": "3"}
	if _, err := cms.Update(ctx, uncond, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("unconditional update: %v", err)
	}
	got, _ := cms.Get(ctx, "a", metav1.GetOptions{})
	if got.Data["k"] != "3" || got.UID != old.UID || !got.CreationTimestamp.Equal(&old.CreationTimestamp) {
		t.Fatalf("after updates: data %v uid %s ts %v", got.Data, got.UID, got.CreationTimestamp)
	}
}

func TestPatchPrecondition(t *testing.T) {
	cs := kubefake.NewClientset(cm("a", nil))
	ctx := context.Background()
	cms := cs.CoreV1().ConfigMaps(ns)
	cur, _ := cms.Get(ctx, "a", metav1.GetOptions{})
	for _, pt := range []types.PatchType{types.MergePatchType, types.StrategicMergePatchType} {
		stale := fmt.Sprintf(`{"metadata":{"resourceVersion":"%d"},"data":{"k":"x"}}`, rvOf(t, cur.ResourceVersion)+100)
		if _, err := cms.Patch(ctx, "a", pt, []byte(stale), metav1.PatchOptions{}); !apierrors.IsConflict(err) {
			t.Fatalf("%s patch with a stale resourceVersion: %v, want 409", pt, err)
		}
		good := fmt.Sprintf(`{"metadata":{"resourceVersion":%q},"data":{"k":%q}}`, cur.ResourceVersion, pt)
		next, err := cms.Patch(ctx, "a", pt, []byte(good), metav1.PatchOptions{})
		if err != nil {
			t.Fatalf("%s patch with the current resourceVersion: %v", pt, err)
		}
		if next.ResourceVersion == cur.ResourceVersion || next.Data["k"] != string(pt) {
			t.Fatalf("%s patch: rv %s data %v", pt, next.ResourceVersion, next.Data)
		}
		cur = next
	}
	test := fmt.Sprintf(`[{"op":"test","path":"/metadata/resourceVersion","value":"%d"},{"op":"add","path":"/data/j","value":"y"}]`, rvOf(t, cur.ResourceVersion)+1)
	if _, err := cms.Patch(ctx, "a", types.JSONPatchType, []byte(test), metav1.PatchOptions{}); !apierrors.IsInvalid(err) {
		t.Fatalf("json patch whose test fails: %v, want 422", err)
	}
	// A patch without a resourceVersion is unconditional and removes what
	// it sets to null.
	got, err := cms.Patch(ctx, "a", types.MergePatchType, []byte(`{"data":{"k":null}}`), metav1.PatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := got.Data["k"]; ok {
		t.Fatalf("merge patch did not remove k: %v", got.Data)
	}
}

func TestDeletePreconditionsAndFinalizers(t *testing.T) {
	withFinalizer := cm("f", nil)
	withFinalizer.Finalizers = []string{"example.com/keep"}
	cs := kubefake.NewClientset(cm("a", nil), withFinalizer)
	ctx := context.Background()
	cms := cs.CoreV1().ConfigMaps(ns)
	a, _ := cms.Get(ctx, "a", metav1.GetOptions{})
	if err := cms.Delete(ctx, "a", metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: ptr.To("999")}}); !apierrors.IsConflict(err) {
		t.Fatalf("delete with a stale resourceVersion: %v, want 409", err)
	}
	if err := cms.Delete(ctx, "a", metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: ptr.To(types.UID("other"))}}); !apierrors.IsConflict(err) {
		t.Fatalf("delete with another uid: %v, want 409", err)
	}
	if err := cms.Delete(ctx, "a", metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &a.ResourceVersion, UID: &a.UID}}); err != nil {
		t.Fatalf("delete with matching preconditions: %v", err)
	}
	if _, err := cms.Get(ctx, "a", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("after delete: %v, want NotFound", err)
	}

	if err := cms.Delete(ctx, "f", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	f, err := cms.Get(ctx, "f", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("an object with a finalizer was removed at once: %v", err)
	}
	if f.DeletionTimestamp == nil {
		t.Fatal("deletionTimestamp not set")
	}
	f.Finalizers = nil
	if _, err := cms.Update(ctx, f, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cms.Get(ctx, "f", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("after its last finalizer went: %v, want NotFound", err)
	}
}

func nextEvent(t *testing.T, w watch.Interface) watch.Event {
	t.Helper()
	select {
	case ev, ok := <-w.ResultChan():
		if !ok {
			t.Fatal("watch closed")
		}
		return ev
	case <-time.After(10 * time.Second):
		t.Fatal("no event within 10s")
	}
	return watch.Event{}
}

func TestWatchFromListResourceVersion(t *testing.T) {
	cs := kubefake.NewClientset(cm("a", map[string]string{"app": "x"}))
	ctx := context.Background()
	cms := cs.CoreV1().ConfigMaps(ns)
	list, err := cms.List(ctx, metav1.ListOptions{LabelSelector: "app=x"})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 || list.ResourceVersion == "" {
		t.Fatalf("list: %d items at rv %q", len(list.Items), list.ResourceVersion)
	}
	// Changes between the list and the watch are not lost.
	if _, err := cms.Create(ctx, cm("b", map[string]string{"app": "x"}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cms.Create(ctx, cm("other", map[string]string{"app": "y"}), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	w, err := cms.Watch(ctx, metav1.ListOptions{LabelSelector: "app=x", ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	ev := nextEvent(t, w)
	if got := ev.Object.(*corev1.ConfigMap); ev.Type != watch.Added || got.Name != "b" {
		t.Fatalf("first event %s %s, want ADDED b", ev.Type, got.Name)
	}
	a, _ := cms.Get(ctx, "a", metav1.GetOptions{})
	if err := cms.Delete(ctx, "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	ev = nextEvent(t, w)
	got := ev.Object.(*corev1.ConfigMap)
	if ev.Type != watch.Deleted || got.Name != "a" {
		t.Fatalf("second event %s %s, want DELETED a", ev.Type, got.Name)
	}
	if rvOf(t, got.ResourceVersion) <= rvOf(t, a.ResourceVersion) {
		t.Fatalf("DELETED carries rv %s, not above the object's %s", got.ResourceVersion, a.ResourceVersion)
	}
}

// A watch from before the kept history opens, and its one event is a
// 410 Gone, as the apiserver's watch cache sends it; Watch itself does
// not fail.
func TestWatchTooOldIsGone(t *testing.T) {
	cs := kubefake.Config{WatchHistory: 2}.NewClientset()
	ctx := context.Background()
	cms := cs.CoreV1().ConfigMaps(ns)
	list, _ := cms.List(ctx, metav1.ListOptions{})
	for i := range 3 {
		if _, err := cms.Create(ctx, cm(fmt.Sprint("c", i), nil), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	w, err := cms.Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatalf("watch from a compacted resourceVersion: %v, want the 410 as an event", err)
	}
	expectGone(t, w)
}

// expectGone reads a watch whose one event must be a 410 Gone, after
// which the watch must end.
func expectGone(t *testing.T, w watch.Interface) {
	t.Helper()
	defer w.Stop()
	ev := nextEvent(t, w)
	if ev.Type != watch.Error {
		t.Fatalf("first event %s, want ERROR", ev.Type)
	}
	if err := apierrors.FromObject(ev.Object); !apierrors.IsResourceExpired(err) || apierrors.ReasonForError(err) != metav1.StatusReasonExpired {
		t.Fatalf("ERROR event %v, want 410 Expired", err)
	}
	select {
	case ev, ok := <-w.ResultChan():
		if ok {
			t.Fatalf("event %s after the 410, want the watch closed", ev.Type)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the watch stayed open after its 410")
	}
}

// takeLease reads a Lease twice, as two candidates would, and has each
// write itself as holder; it reports how many writes succeeded.
func takeLease(t *testing.T, cs kubernetes.Interface) int {
	t.Helper()
	ctx := context.Background()
	leases := cs.CoordinationV1().Leases(ns)
	if _, err := leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "l"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var reads []*coordinationv1.Lease
	for range 2 {
		l, err := leases.Get(ctx, "l", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		reads = append(reads, l)
	}
	won := 0
	for i, l := range reads {
		l.Spec.HolderIdentity = ptr.To(fmt.Sprint("candidate-", i))
		if _, err := leases.Update(ctx, l, metav1.UpdateOptions{}); err == nil {
			won++
		} else if !apierrors.IsConflict(err) {
			t.Fatalf("update: %v", err)
		}
	}
	return won
}

// The reason this package exists: on client-go's fake both candidates
// take the Lease; here one does.
func TestOneCandidateTakesALease(t *testing.T) {
	if got := takeLease(t, fake.NewClientset()); got != 2 {
		t.Fatalf("client-go's fake let %d candidates take the lease; this test assumes 2", got)
	}
	if got := takeLease(t, kubefake.NewClientset()); got != 1 {
		t.Fatalf("%d candidates took the lease, want 1", got)
	}
}

func TestInitialObjectsKeepTheirResourceVersion(t *testing.T) {
	c := cm("a", nil)
	c.ResourceVersion = "41"
	cs := kubefake.NewClientset(c, cm("b", nil))
	ctx := context.Background()
	b, _ := cs.CoreV1().ConfigMaps(ns).Get(ctx, "b", metav1.GetOptions{})
	if b.ResourceVersion != "42" {
		t.Fatalf("b has rv %s, want 42 (after a's 41)", b.ResourceVersion)
	}
}
