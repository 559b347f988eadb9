package nodestatus

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"
)

// TaintToBeDeletedByClusterAutoscaler is the taint the cluster autoscaler
// puts on a Node it is about to remove; the cloud provider's service
// controller takes such Nodes out of load balancers.
const TaintToBeDeletedByClusterAutoscaler = "ToBeDeletedByClusterAutoscaler"

// HealthRule says which Nodes can take traffic. The zero value is the
// default rule: Ready=True, a Lease seen renewing, no unreachable,
// not-ready or to-be-deleted taint, and no
// node.kubernetes.io/exclude-from-external-load-balancers label.
type HealthRule struct {
	// Conditions must all be True. Nil means Ready alone; a non-nil list
	// replaces it, so list Ready with the others, for example
	// {Ready, ConfigOK, ReleaseReady}.
	Conditions []corev1.NodeConditionType
	// ExcludeTaints are taint keys (any effect) that make a Node
	// unhealthy. Nil means node.kubernetes.io/unreachable,
	// node.kubernetes.io/not-ready and ToBeDeletedByClusterAutoscaler; a
	// non-nil list replaces them.
	ExcludeTaints []string
	// ExcludeLabels are label keys whose presence (any value) makes a
	// Node unhealthy. Nil means
	// node.kubernetes.io/exclude-from-external-load-balancers; a non-nil
	// list replaces it.
	ExcludeLabels []string
	// LeaseGrace is how long a Node's heartbeat Lease counts as fresh after
	// the observer last saw it change. 0 means the Lease's own
	// spec.leaseDurationSeconds (DefaultLeaseDuration when unset).
	LeaseGrace time.Duration
	// IgnoreLeases judges Nodes without their Leases (for heartbeats that
	// are status writes; the Ready condition then carries liveness alone).
	IgnoreLeases bool
	// Clock is the observer's clock; nil means the real clock.
	Clock clock.PassiveClock
}

// NodeHealth applies a HealthRule to Nodes, judging each Node's heartbeat
// Lease by when this observer saw it change. Create it with NewNodeHealth;
// it is safe for concurrent use.
//
// Lease freshness is judged on the observer's clock, as the node lifecycle
// controller does, never by comparing the Lease's renewTime with the local
// wall clock: renewTime is written with the node's clock, and the skew
// between two machines would make a live node look dead or a dead one
// alive. A Lease counts as fresh for LeaseGrace after the observer last
// saw its renewTime (or its UID) change. A Lease seen for the first time
// counts as just changed, so that a freshly started or newly elected
// observer does not drop every target at once; a dead Node's Lease
// therefore stays fresh for one grace after the observer first sees it,
// and the Ready condition (which the node lifecycle controller sets to
// Unknown after its grace period) covers that window when it is
// required.
type NodeHealth struct {
	rule HealthRule

	mu   sync.Mutex
	seen map[string]leaseSeen // by Lease name, which is the Node's
}

// leaseSeen is a Lease as last observed, and when it last changed.
type leaseSeen struct {
	uid      types.UID
	renew    time.Time
	duration time.Duration
	changed  time.Time // on the observer's clock
}

// NewNodeHealth returns a NodeHealth over rule, its defaults filled.
func NewNodeHealth(rule HealthRule) *NodeHealth {
	if rule.Conditions == nil {
		rule.Conditions = []corev1.NodeConditionType{corev1.NodeReady}
	}
	if rule.ExcludeTaints == nil {
		rule.ExcludeTaints = []string{corev1.TaintNodeUnreachable, corev1.TaintNodeNotReady, TaintToBeDeletedByClusterAutoscaler}
	}
	if rule.ExcludeLabels == nil {
		rule.ExcludeLabels = []string{corev1.LabelNodeExcludeBalancers}
	}
	if rule.Clock == nil {
		rule.Clock = clock.RealClock{}
	}
	return &NodeHealth{rule: rule, seen: map[string]leaseSeen{}}
}

// ObserveLeases records the node Leases as they are now: the full list of
// the kube-node-lease namespace (or of the Nodes of interest). A Lease
// whose renewTime or UID differs from the last observation is marked as
// changed now; Leases absent from the list are forgotten.
func (h *NodeHealth) ObserveLeases(leases []coordinationv1.Lease) {
	now := h.rule.Clock.Now()
	h.mu.Lock()
	defer h.mu.Unlock()
	next := make(map[string]leaseSeen, len(leases))
	for i := range leases {
		l := &leases[i]
		s := leaseSeen{uid: l.UID, duration: DefaultLeaseDuration, changed: now}
		if l.Spec.RenewTime != nil {
			s.renew = l.Spec.RenewTime.Time
		}
		if d := l.Spec.LeaseDurationSeconds; d != nil && *d > 0 {
			s.duration = time.Duration(*d) * time.Second
		}
		if old, ok := h.seen[l.Name]; ok && old.uid == s.uid && old.renew.Equal(s.renew) {
			s.changed = old.changed
		}
		next[l.Name] = s
	}
	h.seen = next
}

// Healthy reports whether n can take traffic by the rule, and if not,
// why. A Node being deleted is unhealthy.
func (h *NodeHealth) Healthy(n *corev1.Node) (bool, string) {
	if n.DeletionTimestamp != nil {
		return false, "being deleted"
	}
	for _, k := range h.rule.ExcludeLabels {
		if _, ok := n.Labels[k]; ok {
			return false, "label " + k
		}
	}
	for _, t := range n.Spec.Taints {
		if slices.Contains(h.rule.ExcludeTaints, t.Key) {
			return false, "taint " + t.Key
		}
	}
	for _, want := range h.rule.Conditions {
		status := corev1.ConditionUnknown
		found := false
		for _, c := range n.Status.Conditions {
			if c.Type == want {
				status, found = c.Status, true
				break
			}
		}
		if status != corev1.ConditionTrue {
			if !found {
				return false, fmt.Sprintf("condition %s missing", want)
			}
			return false, fmt.Sprintf("condition %s is %s", want, status)
		}
	}
	if h.rule.IgnoreLeases {
		return true, ""
	}
	h.mu.Lock()
	s, ok := h.seen[n.Name]
	h.mu.Unlock()
	if !ok {
		return false, "no Lease seen"
	}
	grace := h.rule.LeaseGrace
	if grace <= 0 {
		grace = s.duration
	}
	if age := h.rule.Clock.Since(s.changed); age > grace {
		return false, fmt.Sprintf("Lease unchanged for %v (grace %v)", age, grace)
	}
	return true, ""
}

// HealthyNodes returns the Nodes of nodes that Healthy accepts, in order.
func (h *NodeHealth) HealthyNodes(nodes []corev1.Node) []corev1.Node {
	var out []corev1.Node
	for i := range nodes {
		if ok, _ := h.Healthy(&nodes[i]); ok {
			out = append(out, nodes[i])
		}
	}
	return out
}

// List lists the node Leases (unless the rule ignores them) and the Nodes
// that opts select, observes the Leases and returns the healthy Nodes.
// Both lists are read from the API server (resourceVersion unset), two
// requests per call: call it at the pace of the reconcile that uses it,
// more often than the Leases' renew interval for the freshest judgement.
func (h *NodeHealth) List(ctx context.Context, client kubernetes.Interface, opts metav1.ListOptions) ([]corev1.Node, error) {
	if !h.rule.IgnoreLeases {
		leases, err := client.CoordinationV1().Leases(corev1.NamespaceNodeLease).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, fmt.Errorf("nodestatus: list node leases: %w", err)
		}
		h.ObserveLeases(leases.Items)
	}
	nodes, err := client.CoreV1().Nodes().List(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("nodestatus: list nodes: %w", err)
	}
	return h.HealthyNodes(nodes.Items), nil
}
