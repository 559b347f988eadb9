package kubefake

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1apply "k8s.io/client-go/applyconfigurations/core/v1"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/clock"
)

// The server writes through fieldTracker, whose REST mapper and field
// managers are built once, and every answer is the one client-go's
// field-managed tracker gives: the same objects, managedFields and their
// timestamps included, after creations, updates of objects and of status,
// patches of each type, server-side apply, no-op writes and deletions.
// The bubble makes both runs stamp the same times.
func TestFieldTrackerAnswersAsTheManagedTracker(t *testing.T) {
	run := func(t *testing.T, upstream bool) []string {
		var out []string
		synctest.Test(t, func(t *testing.T) {
			srv := Config{Clock: clock.RealClock{}}.NewServer(&corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "seeded", UID: "u0"}, Data: map[string]string{"a": "1"}})
			if _, ok := newFieldTracker(srv.tracker); !ok {
				t.Fatal("client-go's field-managed tracker no longer embeds its store: writes build a REST mapper each again")
			}
			if upstream {
				srv.react = k8stesting.ObjectReaction(srv.tracker)
			}
			cs := srv.NewClient()
			ctx := context.Background()
			note := func(what string, obj any, err error) {
				b, merr := json.Marshal(obj)
				if merr != nil {
					t.Fatal(merr)
				}
				out = append(out, fmt.Sprintf("%s: %s err=%v", what, b, err))
				<-time.After(1500 * time.Millisecond) // managedFields times move on (the bubble's clock, once every goroutine waits)
			}
			cms := cs.CoreV1().ConfigMaps("ns")
			cm, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a", UID: "u1", Labels: map[string]string{"x": "1"}},
				Data: map[string]string{"k": "v"}}, metav1.CreateOptions{FieldManager: "one"})
			note("create", cm, err)
			if err != nil {
				t.Fatal(err)
			}
			cm.Data["k2"] = "v2"
			cm, err = cms.Update(ctx, cm, metav1.UpdateOptions{FieldManager: "two"})
			note("update", cm, err)
			same, err := cms.Update(ctx, cm, metav1.UpdateOptions{FieldManager: "three"})
			note("no-op update", same, err)
			got, err := cms.Patch(ctx, "a", types.MergePatchType, []byte(`{"data":{"m":"1"}}`), metav1.PatchOptions{FieldManager: "merge"})
			note("merge patch", got, err)
			got, err = cms.Patch(ctx, "a", types.StrategicMergePatchType, []byte(`{"metadata":{"labels":{"y":"2"}}}`), metav1.PatchOptions{})
			note("strategic patch", got, err)
			got, err = cms.Patch(ctx, "a", types.JSONPatchType, []byte(`[{"op":"remove","path":"/data/k"}]`), metav1.PatchOptions{FieldManager: "json"})
			note("json patch", got, err)
			got, err = cms.Apply(ctx, corev1apply.ConfigMap("a", "ns").WithData(map[string]string{"ssa": "1"}), metav1.ApplyOptions{FieldManager: "ssa", Force: true})
			note("apply", got, err)
			got, err = cms.Apply(ctx, corev1apply.ConfigMap("b", "ns").WithData(map[string]string{"ssa": "1"}), metav1.ApplyOptions{FieldManager: "ssa"})
			note("apply-create", got, err)
			seeded, err := cms.Get(ctx, "seeded", metav1.GetOptions{})
			note("get seeded", seeded, err)
			if err == nil {
				seeded.Data["b"] = "2"
				got, err = cms.Update(ctx, seeded, metav1.UpdateOptions{FieldManager: "later"})
				note("update seeded", got, err)
			}

			nodes := cs.CoreV1().Nodes()
			n, err := nodes.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", UID: "u2"}}, metav1.CreateOptions{})
			note("node create", n, err)
			if err == nil {
				n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
				n, err = nodes.UpdateStatus(ctx, n, metav1.UpdateOptions{FieldManager: "kubelet"})
				note("node status", n, err)
			}
			got2, err := nodes.Patch(ctx, "n", types.StrategicMergePatchType,
				[]byte(`{"status":{"conditions":[{"type":"Ready","status":"False"}]}}`), metav1.PatchOptions{}, "status")
			note("node status patch", got2, err)

			leases := cs.CoordinationV1().Leases("ns")
			l, err := leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "l", UID: "u3"}}, metav1.CreateOptions{})
			note("lease create", l, err)
			if err == nil {
				l.Spec.HolderIdentity = new(string)
				*l.Spec.HolderIdentity = "me"
				l, err = leases.Update(ctx, l, metav1.UpdateOptions{})
				note("lease update", l, err)
			}
			stale := l.DeepCopy()
			stale.ResourceVersion = "1"
			got3, err := leases.Update(ctx, stale, metav1.UpdateOptions{})
			note("stale update", got3, err)
			// Keyed lists with an item that omits its key (a port with no
			// protocol, whose key has a default) or repeats one (duplicate
			// ports, which converting with duplicates allowed accepts).
			pods := cs.CoreV1().Pods("ns")
			pod, err := pods.Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", UID: "u4"},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Ports: []corev1.ContainerPort{{ContainerPort: 80}}}}}},
				metav1.CreateOptions{FieldManager: "one"})
			note("pod create", pod, err)
			if err == nil {
				pod.Spec.Containers[0].Ports = append(pod.Spec.Containers[0].Ports, corev1.ContainerPort{ContainerPort: 80}, corev1.ContainerPort{ContainerPort: 81})
				pod, err = pods.Update(ctx, pod, metav1.UpdateOptions{FieldManager: "two"})
				note("pod duplicate ports", pod, err)
			}
			if err == nil {
				pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{})
				pod, err = pods.Update(ctx, pod, metav1.UpdateOptions{FieldManager: "two"})
				note("pod container without a name", pod, err)
			}
			note("delete", nil, cms.Delete(ctx, "b", metav1.DeleteOptions{}))
			list, err := cms.List(ctx, metav1.ListOptions{})
			note("list", list, err)
		})
		return out
	}
	fast, slow := run(t, false), run(t, true)
	if len(fast) != len(slow) {
		t.Fatalf("%d answers, client-go's tracker gave %d", len(fast), len(slow))
	}
	for i := range fast {
		if fast[i] != slow[i] {
			t.Errorf("answer %d differs:\n got %s\nwant %s", i, fast[i], slow[i])
		}
	}
}
