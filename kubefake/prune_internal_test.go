package kubefake

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"testing/synctest"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
)

// The field manager given the pruned pair computes the managedFields it
// computes from the whole objects: over seeded chains of writes to Nodes,
// Pods and Leases, each by one of a few managers, that change fields deep
// in structs, behind pointers, in atomic structs, in keyed lists and in
// quantities, set them to their zero values and back, and change nothing.
// The two runs share the bubble's clock, so their timestamps agree too.
func TestPrunedFieldManagerAnswersAsOnWholeObjects(t *testing.T) {
	for _, k := range []struct {
		gvr     schema.GroupVersionResource
		initial func() runtime.Object
		mutate  []func(r *rand.Rand, o runtime.Object)
	}{
		{corev1.SchemeGroupVersion.WithResource("nodes"), richNode, nodeMutations},
		{corev1.SchemeGroupVersion.WithResource("pods"), richPod, podMutations},
		{coordinationv1.SchemeGroupVersion.WithResource("leases"), richLease, leaseMutations},
		{policyv1.SchemeGroupVersion.WithResource("poddisruptionbudgets"), richPDB, pdbMutations},
	} {
		t.Run(k.gvr.Resource, func(t *testing.T) {
			for seed := range uint64(6) {
				synctest.Test(t, func(t *testing.T) {
					checkPrunedChain(t, seed, k.gvr, k.initial(), k.mutate)
				})
			}
		})
	}
}

func checkPrunedChain(t *testing.T, seed uint64, gvr schema.GroupVersionResource, initial runtime.Object, mutate []func(*rand.Rand, runtime.Object)) {
	ft, ok := newFieldTracker(Config{}.NewServer().tracker)
	if !ok {
		t.Fatal("no field tracker")
	}
	_, mgr, err := ft.manager(gvr)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(seed, 7))
	kind, err := ft.mapper.KindFor(gvr)
	if err != nil {
		t.Fatal(err)
	}
	live, err := newEmpty(kind)
	if err != nil {
		t.Fatal(err)
	}
	initial.GetObjectKind().SetGroupVersionKind(kind)
	cur, err := mgr.Update(live, initial, "creator")
	if err != nil {
		t.Fatal(err)
	}
	mustAccessor(t, cur).SetUID("uid") // as stored: a uid tells an update from a creation
	if seed%2 == 1 {
		// An object stored without managedFields (given to NewServer, or
		// added to the Tracker) gets none on update.
		mustAccessor(t, cur).SetManagedFields(nil)
	}
	managers := []string{"kubelet", "agent", "operator", ""}
	for step := range 60 {
		next := cur.DeepCopyObject()
		for range 1 + r.IntN(3) {
			if r.IntN(8) > 0 {
				mutate[r.IntN(len(mutate))](r, next)
			}
		}
		manager := managers[r.IntN(len(managers))]
		wantLive, wantNew := cur.DeepCopyObject(), next.DeepCopyObject()
		want, werr := mgr.Update(wantLive, wantNew, manager)

		gotLive, gotNew := cur.DeepCopyObject(), next.DeepCopyObject()
		liveBefore, newBefore := gotLive.DeepCopyObject(), gotNew.DeepCopyObject()
		pl, pn, ok := prunePair(gotLive, gotNew)
		if !ok {
			t.Fatalf("seed %d step %d: prunePair refused a %T", seed, step, gotLive)
		}
		got, gerr := mgr.Update(pl, pn, manager)
		if !reflect.DeepEqual(gotLive, liveBefore) || !reflect.DeepEqual(gotNew, newBefore) {
			t.Fatalf("seed %d step %d: pruning changed the objects it copied", seed, step)
		}
		if (werr == nil) != (gerr == nil) {
			t.Fatalf("seed %d step %d: error %v, on whole objects %v", seed, step, gerr, werr)
		}
		if werr != nil {
			continue
		}
		wm, gm := mustAccessor(t, want).GetManagedFields(), mustAccessor(t, got).GetManagedFields()
		if !reflect.DeepEqual(wm, gm) {
			t.Fatalf("seed %d step %d (manager %q): managedFields\n got %s\nwant %s", seed, step, manager, fmtManaged(gm), fmtManaged(wm))
		}
		cur = want
		<-time.After(time.Second) // the next write's timestamps differ
	}
}

func newEmpty(gvk schema.GroupVersionKind) (runtime.Object, error) {
	o, err := scheme.Scheme.New(gvk)
	if err != nil {
		return nil, err
	}
	o.GetObjectKind().SetGroupVersionKind(gvk)
	return o, nil
}

func mustAccessor(t *testing.T, o runtime.Object) metav1.Object {
	t.Helper()
	m, err := meta.Accessor(o)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func fmtManaged(m []metav1.ManagedFieldsEntry) string {
	var s string
	for _, e := range m {
		s += fmt.Sprintf("\n  %s %s %s %s", e.Manager, e.Operation, e.Time, e.FieldsV1)
	}
	return s
}

func richNode() runtime.Object {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{"a": "1"}},
		Spec:       corev1.NodeSpec{PodCIDR: "10.0.0.0/24", Taints: []corev1.Taint{{Key: "k", Effect: corev1.TaintEffectNoSchedule}}},
		Status: corev1.NodeStatus{
			Capacity: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")},
			Conditions: []corev1.NodeCondition{
				{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "Ready"},
				{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse},
			},
			Addresses:       []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.1"}},
			DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: 10250}},
			NodeInfo:        corev1.NodeSystemInfo{KubeletVersion: "v1.37.1", OSImage: "x"},
		},
	}
}

var nodeMutations = []func(*rand.Rand, runtime.Object){
	func(r *rand.Rand, o runtime.Object) { // a heartbeat
		n := o.(*corev1.Node)
		for i := range n.Status.Conditions {
			n.Status.Conditions[i].LastHeartbeatTime = metav1.NewTime(time.Unix(int64(r.IntN(1e6)), 0))
		}
	},
	func(r *rand.Rand, o runtime.Object) {
		n := o.(*corev1.Node)
		if len(n.Status.Conditions) > 0 {
			n.Status.Conditions[0].Status = []corev1.ConditionStatus{corev1.ConditionTrue, corev1.ConditionFalse, corev1.ConditionUnknown}[r.IntN(3)]
		}
	},
	func(r *rand.Rand, o runtime.Object) {
		n := o.(*corev1.Node)
		if r.IntN(2) == 0 && len(n.Status.Conditions) > 0 {
			n.Status.Conditions = n.Status.Conditions[1:]
		} else {
			n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{Type: corev1.NodeConditionType(fmt.Sprint("C", r.IntN(4))), Status: corev1.ConditionTrue})
		}
	},
	func(r *rand.Rand, o runtime.Object) { o.(*corev1.Node).Spec.Unschedulable = r.IntN(2) == 0 },
	func(r *rand.Rand, o runtime.Object) {
		o.(*corev1.Node).Spec.PodCIDR = []string{"", "10.0.1.0/24"}[r.IntN(2)]
	},
	func(r *rand.Rand, o runtime.Object) {
		n := o.(*corev1.Node)
		n.Status.Capacity = corev1.ResourceList{corev1.ResourceCPU: *resource.NewQuantity(int64(1+r.IntN(3)), resource.DecimalSI)}
	},
	func(r *rand.Rand, o runtime.Object) {
		o.(*corev1.Node).Status.NodeInfo.KubeletVersion = []string{"", "v1.37.1", "v1.38.0"}[r.IntN(3)]
	},
	func(r *rand.Rand, o runtime.Object) {
		o.(*corev1.Node).Status.DaemonEndpoints.KubeletEndpoint.Port = int32(r.IntN(3)) * 10250
	},
	func(r *rand.Rand, o runtime.Object) {
		n := o.(*corev1.Node)
		n.Status.Features = []*corev1.NodeFeatures{nil, {}, {SupplementalGroupsPolicy: ptr.To(true)}, {SupplementalGroupsPolicy: ptr.To(false)}}[r.IntN(4)]
	},
	func(r *rand.Rand, o runtime.Object) {
		n := o.(*corev1.Node)
		n.Status.Addresses = append(n.Status.Addresses[:min(len(n.Status.Addresses), r.IntN(2))], corev1.NodeAddress{Type: corev1.NodeHostName, Address: "h"})
	},
	func(r *rand.Rand, o runtime.Object) {
		n := o.(*corev1.Node)
		n.Spec.Taints = []corev1.Taint{{Key: fmt.Sprint("k", r.IntN(2)), Effect: corev1.TaintEffectNoSchedule}}
	},
	func(r *rand.Rand, o runtime.Object) { o.(*corev1.Node).Labels[fmt.Sprint("l", r.IntN(3))] = "v" },
}

func richPod() runtime.Object {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"},
		Spec: corev1.PodSpec{
			NodeName: "n",
			Containers: []corev1.Container{{Name: "c", Image: "i:1", Ports: []corev1.ContainerPort{{ContainerPort: 80}},
				LivenessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Port: intstr.FromString("http")}}},
				Resources:     corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}}}},
			SecurityContext: &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](1000), RunAsNonRoot: ptr.To(true)},
			Affinity: &corev1.Affinity{PodAffinity: &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{
				{TopologyKey: "zone", LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "a"}}}}}},
		},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{Name: "c",
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(time.Unix(100, 0))}}}}},
	}
}

var podMutations = []func(*rand.Rand, runtime.Object){
	func(r *rand.Rand, o runtime.Object) {
		o.(*corev1.Pod).Spec.Containers[0].Image = fmt.Sprint("i:", r.IntN(3))
	},
	func(r *rand.Rand, o runtime.Object) {
		p := o.(*corev1.Pod)
		p.Spec.Containers[0].Ports = append(p.Spec.Containers[0].Ports, corev1.ContainerPort{ContainerPort: int32(80 + r.IntN(2))})
	},
	func(r *rand.Rand, o runtime.Object) {
		p := o.(*corev1.Pod)
		if len(p.Spec.Containers) < 3 {
			p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: fmt.Sprint("s", r.IntN(3)), Image: "side"})
		} else {
			p.Spec.Containers = p.Spec.Containers[:1]
		}
	},
	func(r *rand.Rand, o runtime.Object) {
		p := o.(*corev1.Pod)
		p.Spec.SecurityContext = []*corev1.PodSecurityContext{nil, {RunAsUser: ptr.To[int64](1000)},
			{RunAsUser: ptr.To[int64](1000), RunAsNonRoot: ptr.To(true)}, {RunAsUser: ptr.To[int64](1001), RunAsNonRoot: ptr.To(true)}}[r.IntN(4)]
	},
	func(r *rand.Rand, o runtime.Object) { // inside an atomic label selector
		p := o.(*corev1.Pod)
		if a := p.Spec.Affinity; a != nil && a.PodAffinity != nil && len(a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution) > 0 {
			a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution[0].LabelSelector = &metav1.LabelSelector{
				MatchLabels: map[string]string{"app": fmt.Sprint("a", r.IntN(2))}, MatchExpressions: []metav1.LabelSelectorRequirement{
					{Key: "k", Operator: metav1.LabelSelectorOpExists}}[:r.IntN(2)]}
		}
	},
	func(r *rand.Rand, o runtime.Object) {
		p := o.(*corev1.Pod)
		if r.IntN(3) == 0 {
			p.Spec.Affinity = nil
		} else {
			p.Spec.Affinity = &corev1.Affinity{PodAffinity: &corev1.PodAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{
				{TopologyKey: []string{"zone", "host"}[r.IntN(2)], LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "a"}}}}}}
		}
	},
	func(r *rand.Rand, o runtime.Object) {
		o.(*corev1.Pod).Spec.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse([]string{"1Gi", "1024Mi", "2Gi"}[r.IntN(3)])}
	},
	func(r *rand.Rand, o runtime.Object) {
		p := o.(*corev1.Pod)
		s := &p.Status.ContainerStatuses[0]
		switch r.IntN(3) {
		case 0:
			s.State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(time.Unix(int64(r.IntN(3)), 0))}}
		case 1:
			s.State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: int32(r.IntN(2)), Reason: "Done"}}
		default:
			s.RestartCount++
		}
	},
	func(r *rand.Rand, o runtime.Object) {
		o.(*corev1.Pod).Status.Phase = []corev1.PodPhase{corev1.PodRunning, corev1.PodSucceeded, ""}[r.IntN(3)]
	},
	func(r *rand.Rand, o runtime.Object) {
		o.(*corev1.Pod).Spec.Containers[0].LivenessProbe = []*corev1.Probe{nil,
			{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Port: intstr.FromInt32(8080)}}},
			{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Port: intstr.FromString("http")}}, PeriodSeconds: 5}}[r.IntN(3)]
	},
}

func richLease() runtime.Object {
	return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "l"},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("a"), LeaseDurationSeconds: ptr.To[int32](40)}}
}

var leaseMutations = []func(*rand.Rand, runtime.Object){
	func(r *rand.Rand, o runtime.Object) {
		o.(*coordinationv1.Lease).Spec.RenewTime = &metav1.MicroTime{Time: time.Unix(int64(r.IntN(1e6)), int64(r.IntN(1e6))*1000)}
	},
	func(r *rand.Rand, o runtime.Object) {
		o.(*coordinationv1.Lease).Spec.HolderIdentity = []*string{nil, ptr.To("a"), ptr.To("b")}[r.IntN(3)]
	},
	func(r *rand.Rand, o runtime.Object) {
		o.(*coordinationv1.Lease).Spec.LeaseTransitions = []*int32{nil, ptr.To[int32](0), ptr.To[int32](int32(r.IntN(4)))}[r.IntN(3)]
	},
	func(r *rand.Rand, o runtime.Object) {
		o.(*coordinationv1.Lease).Spec = coordinationv1.LeaseSpec{}
	},
}

func richPDB() runtime.Object {
	return &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "b"},
		Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromString("50%")),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "a"}}}}
}

var pdbMutations = []func(*rand.Rand, runtime.Object){
	func(r *rand.Rand, o runtime.Object) { // a change its JSON does not show: a type that converts itself is compared whole
		if m := o.(*policyv1.PodDisruptionBudget).Spec.MinAvailable; m != nil && m.Type == intstr.String {
			m.IntVal = int32(r.IntN(2))
		}
	},
	func(r *rand.Rand, o runtime.Object) {
		o.(*policyv1.PodDisruptionBudget).Spec.MinAvailable = []*intstr.IntOrString{nil, ptr.To(intstr.FromInt32(1)), ptr.To(intstr.FromString("50%"))}[r.IntN(3)]
	},
	func(r *rand.Rand, o runtime.Object) { // inside an atomic struct
		o.(*policyv1.PodDisruptionBudget).Spec.Selector.MatchLabels = map[string]string{"app": fmt.Sprint("a", r.IntN(2))}
	},
	func(r *rand.Rand, o runtime.Object) {
		o.(*policyv1.PodDisruptionBudget).Status.CurrentHealthy = int32(r.IntN(3))
	},
}
