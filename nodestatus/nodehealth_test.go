package nodestatus_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	testclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/reconkit/reconkit/nodestatus"
)

const (
	condConfigOK     corev1.NodeConditionType = "ConfigOK"
	condReleaseReady corev1.NodeConditionType = "ReleaseReady"
)

func healthNode(name string, mod ...func(*corev1.Node)) corev1.Node {
	n := corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"pool": "edge"}},
		Spec:       corev1.NodeSpec{Taints: []corev1.Taint{{Key: "reconkit.io/agent", Effect: corev1.TaintEffectNoSchedule}}},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{
			{Type: corev1.NodeReady, Status: corev1.ConditionTrue},
			{Type: condConfigOK, Status: corev1.ConditionTrue},
			{Type: condReleaseReady, Status: corev1.ConditionTrue},
		}},
	}
	for _, m := range mod {
		m(&n)
	}
	return n
}

func setCond(t corev1.NodeConditionType, s corev1.ConditionStatus) func(*corev1.Node) {
	return func(n *corev1.Node) {
		for i := range n.Status.Conditions {
			if n.Status.Conditions[i].Type == t {
				n.Status.Conditions[i].Status = s
			}
		}
	}
}

func nodeLease(name string, renew time.Time, uid types.UID) coordinationv1.Lease {
	return coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: corev1.NamespaceNodeLease, UID: uid},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity: ptr.To(name), LeaseDurationSeconds: ptr.To[int32](40),
			RenewTime: &metav1.MicroTime{Time: renew},
		},
	}
}

// TestNodeHealthRule: conditions, taints, labels and deletion, under the
// default rule and a rule that requires ConfigOK and ReleaseReady.
func TestNodeHealthRule(t *testing.T) {
	clk := newFakeClock()
	extra := nodestatus.HealthRule{Conditions: []corev1.NodeConditionType{corev1.NodeReady, condConfigOK, condReleaseReady}, Clock: clk}
	custom := nodestatus.HealthRule{ExcludeTaints: []string{"example.com/drain"}, ExcludeLabels: []string{}, Clock: clk}
	def := nodestatus.HealthRule{Clock: clk}
	for _, tc := range []struct {
		name   string
		rule   nodestatus.HealthRule
		mod    func(*corev1.Node)
		want   bool
		reason string
	}{
		{"healthy", def, nil, true, ""},
		{"healthy with every condition", extra, nil, true, ""},
		{"not ready", def, setCond(corev1.NodeReady, corev1.ConditionFalse), false, "condition Ready is False"},
		{"ready unknown", def, setCond(corev1.NodeReady, corev1.ConditionUnknown), false, "condition Ready is Unknown"},
		{"ready missing", def, func(n *corev1.Node) { n.Status.Conditions = n.Status.Conditions[1:] }, false, "condition Ready missing"},
		{"ConfigOK false, not required", def, setCond(condConfigOK, corev1.ConditionFalse), true, ""},
		{"ConfigOK false, required", extra, setCond(condConfigOK, corev1.ConditionFalse), false, "condition ConfigOK is False"},
		{"ReleaseReady false, required", extra, setCond(condReleaseReady, corev1.ConditionFalse), false, "condition ReleaseReady is False"},
		{"ReleaseReady missing, required", extra, func(n *corev1.Node) { n.Status.Conditions = n.Status.Conditions[:2] }, false, "condition ReleaseReady missing"},
		{"unreachable taint", def, addTaint(corev1.TaintNodeUnreachable, corev1.TaintEffectNoExecute), false, "taint " + corev1.TaintNodeUnreachable},
		{"not-ready taint", def, addTaint(corev1.TaintNodeNotReady, corev1.TaintEffectNoSchedule), false, "taint " + corev1.TaintNodeNotReady},
		{"autoscaler deletion taint", def, addTaint(nodestatus.TaintToBeDeletedByClusterAutoscaler, corev1.TaintEffectNoSchedule), false, "taint ToBeDeletedByClusterAutoscaler"},
		{"other taint", def, addTaint("example.com/drain", corev1.TaintEffectNoSchedule), true, ""},
		{"custom taint replaces the defaults", custom, addTaint("example.com/drain", corev1.TaintEffectNoSchedule), false, "taint example.com/drain"},
		{"defaults replaced", custom, addTaint(corev1.TaintNodeUnreachable, corev1.TaintEffectNoExecute), true, ""},
		{"excluded from load balancers", def, addLabel(corev1.LabelNodeExcludeBalancers, ""), false, "label " + corev1.LabelNodeExcludeBalancers},
		{"exclusion label not applied", custom, addLabel(corev1.LabelNodeExcludeBalancers, "true"), true, ""},
		{"being deleted", def, func(n *corev1.Node) { n.DeletionTimestamp = &metav1.Time{Time: clk.Now()} }, false, "being deleted"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := nodestatus.NewNodeHealth(tc.rule)
			h.ObserveLeases([]coordinationv1.Lease{nodeLease("n1", clk.Now(), "u1")})
			n := healthNode("n1")
			if tc.mod != nil {
				tc.mod(&n)
			}
			ok, reason := h.Healthy(&n)
			require.Equal(t, tc.want, ok, reason)
			require.Equal(t, tc.reason, reason)
		})
	}
}

func addTaint(key string, effect corev1.TaintEffect) func(*corev1.Node) {
	return func(n *corev1.Node) { n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: key, Effect: effect}) }
}

func addLabel(key, value string) func(*corev1.Node) {
	return func(n *corev1.Node) { n.Labels[key] = value }
}

// TestNodeHealthLeaseFreshness: a Lease is fresh for its duration (or the
// rule's grace) after the observer saw it change, whatever its renewTime
// says against the observer's wall clock.
func TestNodeHealthLeaseFreshness(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	skewed := now.Add(-time.Hour) // the node's clock is an hour behind
	type step struct {
		advance time.Duration
		renew   time.Duration // renewTime, from the node's skewed clock; <0: the Lease is absent
		uid     types.UID
		want    bool
	}
	for _, tc := range []struct {
		name  string
		grace time.Duration
		steps []step
	}{
		{"first sight is fresh, for the lease duration", 0, []step{
			{0, 0, "u1", true}, {40 * time.Second, 0, "u1", true}, {time.Millisecond, 0, "u1", false},
		}},
		{"renewals keep it fresh despite skew", 0, []step{
			{0, 0, "u1", true}, {30 * time.Second, 10 * time.Second, "u1", true},
			{30 * time.Second, 20 * time.Second, "u1", true}, {30 * time.Second, 20 * time.Second, "u1", true},
			{10*time.Second + time.Millisecond, 20 * time.Second, "u1", false},
			{time.Second, 30 * time.Second, "u1", true},
		}},
		{"a recreated lease counts as a change", 0, []step{
			{0, 0, "u1", true}, {41 * time.Second, 0, "u1", false}, {0, 0, "u2", true},
		}},
		{"rule grace overrides the lease duration", 5 * time.Second, []step{
			{0, 0, "u1", true}, {5 * time.Second, 0, "u1", true}, {time.Millisecond, 0, "u1", false},
		}},
		{"an absent lease is unhealthy and forgotten", 0, []step{
			{0, 0, "u1", true}, {time.Second, -1, "", false}, {time.Second, 0, "u1", true},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := testclock.NewFakeClock(now)
			h := nodestatus.NewNodeHealth(nodestatus.HealthRule{LeaseGrace: tc.grace, Clock: clk})
			n := healthNode("n1")
			for i, s := range tc.steps {
				clk.Step(s.advance)
				var leases []coordinationv1.Lease
				if s.renew >= 0 {
					leases = append(leases, nodeLease("n1", skewed.Add(s.renew), s.uid))
				}
				h.ObserveLeases(append(leases, nodeLease("other", clk.Now(), "x")))
				ok, reason := h.Healthy(&n)
				require.Equal(t, s.want, ok, "step %d: %s", i, reason)
			}
		})
	}
	h := nodestatus.NewNodeHealth(nodestatus.HealthRule{IgnoreLeases: true})
	n := healthNode("n1")
	ok, reason := h.Healthy(&n)
	require.True(t, ok, "leases ignored: %s", reason)
}

// TestNodeHealthList reads the Leases and the selected Nodes and keeps the
// healthy ones.
func TestNodeHealthList(t *testing.T) {
	clk := newFakeClock()
	n1, n2, n3 := healthNode("n1"), healthNode("n2", setCond(corev1.NodeReady, corev1.ConditionFalse)), healthNode("n3")
	l1 := nodeLease("n1", clk.Now(), "u1")
	cs := fake.NewClientset(&n1, &n2, &n3, &l1)
	h := nodestatus.NewNodeHealth(nodestatus.HealthRule{Clock: clk})
	got, err := h.List(context.Background(), cs, metav1.ListOptions{LabelSelector: "pool=edge"})
	require.NoError(t, err)
	var names []string
	for _, n := range got {
		names = append(names, n.Name)
	}
	require.Equal(t, []string{"n1"}, names, "n2 is not ready, n3 has no Lease")
}
