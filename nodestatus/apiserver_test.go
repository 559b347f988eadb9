package nodestatus_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	testclock "k8s.io/utils/clock/testing"

	"github.com/reconkit/reconkit/internal/testenv"
	"github.com/reconkit/reconkit/nodestatus"
	"github.com/reconkit/reconkit/nodestatus/nodestatustest"
)

// transportCounter counts requests by "VERB resource", where resource is
// nodes, nodes/status or leases.
type transportCounter struct {
	mu sync.Mutex
	n  map[string]int
}

type countingRT struct {
	c  *transportCounter
	rt http.RoundTripper
}

func (r countingRT) RoundTrip(req *http.Request) (*http.Response, error) {
	res := "other"
	p := req.URL.Path
	switch {
	case strings.Contains(p, "/leases"):
		res = "leases"
	case strings.Contains(p, "/nodes") && strings.HasSuffix(p, "/status"):
		res = "nodes/status"
	case strings.Contains(p, "/nodes"):
		res = "nodes"
	}
	r.c.mu.Lock()
	r.c.n[req.Method+" "+res]++
	r.c.mu.Unlock()
	return r.rt.RoundTrip(req)
}

func (r countingRT) WrappedRoundTripper() http.RoundTripper { return r.rt }

func (c *transportCounter) get(key string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[key]
}

func (c *transportCounter) snapshot() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	m := make(map[string]int, len(c.n))
	for k, v := range c.n {
		m[k] = v
	}
	return m
}

// countedClient returns a client whose requests are counted.
func countedClient(t *testing.T, cfg *rest.Config) (kubernetes.Interface, *transportCounter) {
	t.Helper()
	tc := &transportCounter{n: map[string]int{}}
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { return countingRT{c: tc, rt: rt} }
	cfg.QPS, cfg.Burst = -1, 0
	cs, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	return cs, tc
}

type apiEnv struct {
	a     *testenv.APIServerInstance
	admin kubernetes.Interface // an uncounted client for the test's own reads and writes
}

func (e *apiEnv) node(t *testing.T, name string) *corev1.Node {
	t.Helper()
	n, err := e.admin.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(t, err)
	return n
}

func (e *apiEnv) lease(t *testing.T, name string) *coordinationv1.Lease {
	t.Helper()
	l, err := e.admin.CoordinationV1().Leases("kube-node-lease").Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(t, err)
	return l
}

// eventually waits for cond on the server, stepping the fake clock (when
// given) so that retries and renewals can happen; never while a ping that
// answers at once is in flight (see pingGauge), which the steps would time
// out.
func eventually(t *testing.T, clk *testclock.FakeClock, cond func() bool, msg string) {
	t.Helper()
	require.Eventually(t, func() bool {
		if cond() {
			return true
		}
		if clk != nil && onClock.noPingInFlight(clk) {
			clk.Step(100 * time.Millisecond)
		}
		return false
	}, waitFor, 20*time.Millisecond, msg)
}

func ptrTo[T any](v T) *T { return &v }

func nodeAddrs(list ...string) []corev1.NodeAddress {
	var out []corev1.NodeAddress
	for _, a := range list {
		out = append(out, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: a})
	}
	return out
}

func setCondition(n *corev1.Node, typ corev1.NodeConditionType, status corev1.ConditionStatus, reason string) {
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == typ {
			n.Status.Conditions[i].Status, n.Status.Conditions[i].Reason = status, reason
			return
		}
	}
	n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{Type: typ, Status: status, Reason: reason})
}

func condStatus(n *corev1.Node, typ corev1.NodeConditionType) corev1.ConditionStatus {
	if c := condition(n, typ); c != nil {
		return c.Status
	}
	return ""
}

// noPatchesUntilMarker notifies the provider's unchanged status several
// times, calling between before each, then notifies one real change (a
// marker label) and checks that exactly one PATCH reached the server: the
// unchanged notifications (whose jobs ran before the marker's, or were
// coalesced into it) wrote nothing.
func noPatchesUntilMarker(t *testing.T, p *nodestatustest.Provider, tc *transportCounter, between func()) {
	t.Helper()
	before := tc.get("PATCH nodes/status")
	for range 5 {
		between()
		p.UpdateStatus(func(*corev1.Node) {})
	}
	p.UpdateStatus(func(n *corev1.Node) { n.Labels["marker"] = "1" })
	eventually(t, nil, func() bool { return tc.get("PATCH nodes/status") > before }, "the marker is written")
	require.Equal(t, before+1, tc.get("PATCH nodes/status"), "one PATCH: the marker's")
}

// expectPingFailureAndCorrection checks, after a rejected status, that a
// failing ping still sets Ready=False and that the provider's corrected
// status (without what was rejected) is written in full.
func expectPingFailureAndCorrection(t *testing.T, e *apiEnv, p *nodestatustest.Provider, clk *testclock.FakeClock, name string) {
	t.Helper()
	p.SetPingError(errors.New("backend: connection refused"))
	step(t, clk, 10500*time.Millisecond)
	eventually(t, nil, func() bool {
		r := condition(e.node(t, name), corev1.NodeReady)
		return r.Status == corev1.ConditionFalse && r.Reason == nodestatus.ReasonPingFailed
	}, "a failing ping sets Ready=False")
	p.SetPingError(nil)
	p.SetStatus(testNode(name)) // the provider drops what was rejected
	p.UpdateStatus(func(n *corev1.Node) { n.Labels["corrected"] = "yes" })
	step(t, clk, 10500*time.Millisecond)
	eventually(t, nil, func() bool {
		n := e.node(t, name)
		return n.Labels["corrected"] == "yes" && condStatus(n, corev1.NodeReady) == corev1.ConditionTrue && condStatus(n, corev1.NodeMemoryPressure) == corev1.ConditionFalse
	}, "the corrected status is written in full")
}

// recorder is an ErrorHandler and a Metrics hook that remember what they
// saw.
type recorder struct {
	mu   sync.Mutex
	errs []error
	obs  map[string]int
}

func (r *recorder) handle(_ context.Context, err error) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, err)
	return nil
}

func (r *recorder) Observe(o nodestatus.Observation) {
	call, out := o.Call, o.Outcome
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.obs == nil {
		r.obs = map[string]int{}
	}
	r.obs[string(call)+" "+string(out)]++
}

func (r *recorder) count(call nodestatus.Call, out nodestatus.Outcome) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.obs[string(call)+" "+string(out)]
}

func (r *recorder) errors() []error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]error(nil), r.errs...)
}

// sawRejected reports whether an error wrapping ErrRejected for which is
// holds reached the handler.
func (r *recorder) sawRejected(is func(error) bool) bool {
	for _, err := range r.errors() {
		if errors.Is(err, nodestatus.ErrRejected) && is(err) {
			return true
		}
	}
	return false
}

// forbidLabel installs a validating admission policy that answers 403 to
// any node (or node status) write carrying the label, as the
// NodeRestriction admission plugin does for labels a node may not set, and
// waits until it is in force.
func forbidLabel(t *testing.T, admin kubernetes.Interface, label string) {
	t.Helper()
	ctx := context.Background()
	name := "forbid-" + strings.NewReplacer("/", "-", ".", "-").Replace(label)
	_, err := admin.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(ctx, &admissionv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptrTo(admissionv1.Fail),
			MatchConstraints: &admissionv1.MatchResources{ResourceRules: []admissionv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionv1.RuleWithOperations{
					Operations: []admissionv1.OperationType{admissionv1.Create, admissionv1.Update},
					Rule:       admissionv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"nodes", "nodes/status"}},
				},
			}}},
			Validations: []admissionv1.Validation{{
				Expression: fmt.Sprintf("!has(object.metadata.labels) || !(%q in object.metadata.labels)", label),
				Reason:     ptrTo(metav1.StatusReasonForbidden),
				Message:    "label " + label + " is not allowed",
			}},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = admin.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Create(ctx, &admissionv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       admissionv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: name, ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	probe := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name + "-probe", Labels: map[string]string{label: "x"}}}
	eventually(t, nil, func() bool {
		_, err := admin.CoreV1().Nodes().Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return apierrors.IsForbidden(err)
	}, "the policy is in force")
}

func newClock() *testclock.FakeClock {
	return testclock.NewFakeClock(time.Now().Truncate(time.Second))
}

func TestAPIServer(t *testing.T) {
	t.Parallel() // a server of its own: next to the other real-server tests
	a := testenv.APIServer(t)
	admin, err := kubernetes.NewForConfig(a.Config())
	require.NoError(t, err)
	e := &apiEnv{a: a, admin: admin}
	ctx := context.Background()

	// The API server must create kube-node-lease itself.
	require.Eventually(t, func() bool {
		_, err := admin.CoreV1().Namespaces().Get(ctx, "kube-node-lease", metav1.GetOptions{})
		return err == nil
	}, waitFor, 50*time.Millisecond, "kube-node-lease namespace")

	t.Run("RegistrationAndLease", func(t *testing.T) {
		cs, _ := countedClient(t, a.Config())
		clk := newClock()
		c := start(t, nodestatus.Config{Client: cs, Node: testNode("reg"), Clock: clk})
		waitReady(t, c)
		n := e.node(t, "reg")
		require.Equal(t, "virtual-kubelet", n.Labels["type"])
		require.Equal(t, "fake", n.Annotations["example.com/provider"])
		require.Contains(t, n.Annotations, nodestatus.AnnotationLastApplied)
		require.Contains(t, n.Spec.Taints, testNode("reg").Spec.Taints[0], "the spec is registered")
		r := condition(n, corev1.NodeReady)
		require.NotNil(t, r)
		require.Equal(t, corev1.ConditionTrue, r.Status)
		require.False(t, r.LastHeartbeatTime.IsZero())
		require.Equal(t, "10.0.0.1", n.Status.Addresses[0].Address, "the status is written")

		l := e.lease(t, "reg")
		require.Equal(t, "reg", *l.Spec.HolderIdentity)
		require.EqualValues(t, 40, *l.Spec.LeaseDurationSeconds)
		require.Equal(t, []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: "reg", UID: n.UID}}, l.OwnerReferences)

		// Renewals move renewTime forward on the server.
		first := l.Spec.RenewTime.Time
		for range 3 {
			step(t, clk, 10500*time.Millisecond)
		}
		eventually(t, nil, func() bool { return e.lease(t, "reg").Spec.RenewTime.Time.Sub(first) >= 30*time.Second }, "lease renewed three times")
	})

	t.Run("AdoptionKeepsOthersFields", func(t *testing.T) {
		theirs := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{
				Name:        "adopt",
				Labels:      map[string]string{"team": "infra", "type": "old"},
				Annotations: map[string]string{"example.com/owner": "someone"},
			},
			Spec: corev1.NodeSpec{Unschedulable: true, PodCIDR: "10.9.0.0/24", PodCIDRs: []string{"10.9.0.0/24"}},
		}
		created, err := admin.CoreV1().Nodes().Create(ctx, theirs, metav1.CreateOptions{})
		require.NoError(t, err)
		created.Status.Conditions = []corev1.NodeCondition{{Type: "ExternalCheck", Status: corev1.ConditionTrue, Reason: "Fine", LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}
		_, err = admin.CoreV1().Nodes().UpdateStatus(ctx, created, metav1.UpdateOptions{})
		require.NoError(t, err)

		cs, _ := countedClient(t, a.Config())
		c := start(t, nodestatus.Config{Client: cs, Node: testNode("adopt"), Clock: newClock()})
		waitReady(t, c)
		n := e.node(t, "adopt")
		require.Equal(t, created.UID, n.UID, "adopted, not recreated")
		require.Equal(t, "infra", n.Labels["team"], "others' label kept")
		require.Equal(t, "virtual-kubelet", n.Labels["type"], "our label set")
		require.Equal(t, "someone", n.Annotations["example.com/owner"])
		require.True(t, n.Spec.Unschedulable, "an administrator's cordon is kept")
		require.Equal(t, "10.9.0.0/24", n.Spec.PodCIDR)
		require.NotNil(t, condition(n, "ExternalCheck"), "others' condition kept")
		require.NotNil(t, condition(n, corev1.NodeReady))
	})

	t.Run("ConditionsWrittenByOthersSurvive", func(t *testing.T) {
		// The original's scenario: we write [A, B], someone adds C, we go to
		// [A]: B is deleted, C survives.
		base := testNode("abc")
		base.Status.Conditions = []corev1.NodeCondition{
			{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "A"},
			{Type: "B", Status: corev1.ConditionTrue, Reason: "B"},
		}
		p := nodestatustest.NewProvider(base)
		cs, _ := countedClient(t, a.Config())
		// B is the provider's: Config.Node's conditions it could not remove.
		cfgNode := base.DeepCopy()
		cfgNode.Status.Conditions = cfgNode.Status.Conditions[:1]
		c := start(t, nodestatus.Config{Client: cs, Node: cfgNode, Provider: p, Clock: newClock()})
		waitReady(t, c)
		p.UpdateStatus(func(*corev1.Node) {}) // the provider's first notification
		n := waitNode(t, admin, "abc", func(n *corev1.Node) bool { return condition(n, "B") != nil }, "B written")

		n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{Type: "C", Status: corev1.ConditionTrue, Reason: "C", LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()})
		_, err := admin.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
		require.NoError(t, err)

		p.UpdateStatus(func(n *corev1.Node) { n.Status.Conditions = n.Status.Conditions[:1] })
		waitNode(t, admin, "abc", func(n *corev1.Node) bool { return condition(n, "B") == nil }, "B deleted")
		n = e.node(t, "abc")
		require.NotNil(t, condition(n, "C"), "C, written by someone else, survives")
		require.NotNil(t, condition(n, corev1.NodeReady))
	})

	t.Run("LabelAndAnnotationOwnership", func(t *testing.T) {
		p := nodestatustest.NewProvider(testNode("own"))
		cs, _ := countedClient(t, a.Config())
		c := start(t, nodestatus.Config{Client: cs, Node: testNode("own"), Provider: p, Clock: newClock()})
		waitReady(t, c)
		n := e.node(t, "own")
		n.Labels["theirs"] = "x"
		n.Annotations["example.com/theirs"] = "y"
		_, err := admin.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
		require.NoError(t, err)

		p.UpdateStatus(func(n *corev1.Node) {
			n.Labels["added"] = "1"
			n.Annotations["example.com/added"] = "1"
		})
		waitNode(t, admin, "own", func(n *corev1.Node) bool { return n.Labels["added"] == "1" }, "added label")
		p.UpdateStatus(func(n *corev1.Node) {
			delete(n.Labels, "added")
			n.Labels["new"] = "1"
			delete(n.Annotations, "example.com/added")
		})
		waitNode(t, admin, "own", func(n *corev1.Node) bool { return n.Labels["new"] == "1" }, "new label")
		n = e.node(t, "own")
		require.NotContains(t, n.Labels, "added", "our removed label is deleted")
		require.NotContains(t, n.Annotations, "example.com/added", "our removed annotation is deleted")
		require.Equal(t, "x", n.Labels["theirs"])
		require.Equal(t, "y", n.Annotations["example.com/theirs"])
	})

	t.Run("ConfigNodeSurvivesNotifications", func(t *testing.T) {
		// Config.Node carries the registration labels, annotations,
		// taint and InternalIP; the provider knows none of them and
		// reports only its own status.
		p := nodestatus.NewProvider(nodestatus.ProviderConfig{Coalesce: -1})
		cs, _ := countedClient(t, a.Config())
		clk := newClock()
		c := start(t, nodestatus.Config{Client: cs, Node: testNode("base"), Provider: p, Clock: clk, ReRegister: true})
		waitReady(t, c)
		p.SetAddresses(corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: "192.0.2.7"})
		p.ReportCondition("ConfigOK", "True", "Loaded", "config v1")
		p.SetNodeInfo(corev1.NodeSystemInfo{KubeletVersion: "v1.37.1-agent"})
		p.Update(func(n *corev1.Node) { n.Labels = map[string]string{"agent": "yes"} })
		eventually(t, nil, func() bool {
			return condStatus(e.node(t, "base"), "ConfigOK") == corev1.ConditionTrue && e.node(t, "base").Labels["agent"] == "yes"
		}, "the provider's status")
		check := func(n *corev1.Node) {
			t.Helper()
			want := testNode("base")
			for k, v := range want.Labels {
				require.Equal(t, v, n.Labels[k], "registration label %s", k)
			}
			require.Equal(t, "fake", n.Annotations["example.com/provider"], "registration annotation")
			require.Contains(t, n.Spec.Taints, want.Spec.Taints[0], "registration taint")
			require.Contains(t, n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "10.0.0.1"}, "registration address")
			require.Contains(t, n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: "192.0.2.7"}, "the provider's address")
			require.Equal(t, "v1.37.1-agent", n.Status.NodeInfo.KubeletVersion)
			require.Equal(t, corev1.ConditionFalse, condStatus(n, corev1.NodeMemoryPressure), "Config.Node's condition")
		}
		check(e.node(t, "base"))

		// The provider replaces the InternalIP: addresses of a type it
		// reports are its own.
		p.SetAddresses(corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "10.0.0.9"})
		waitNode(t, admin, "base", func(n *corev1.Node) bool {
			return slices.Contains(n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "10.0.0.9"})
		}, "the provider's InternalIP")
		require.NotContains(t, e.node(t, "base").Status.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "10.0.0.1"})
		p.SetAddresses(corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: "192.0.2.7"})
		waitNode(t, admin, "base", func(n *corev1.Node) bool {
			return slices.Contains(n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "10.0.0.1"})
		}, "Config.Node's InternalIP is back once the provider no longer reports one")

		// Registered again after a deletion: still everything.
		old := e.node(t, "base").UID
		require.NoError(t, admin.CoreV1().Nodes().Delete(ctx, "base", metav1.DeleteOptions{}))
		require.NoError(t, admin.CoordinationV1().Leases("kube-node-lease").Delete(ctx, "base", metav1.DeleteOptions{}))
		step(t, clk, 10500*time.Millisecond)
		eventually(t, nil, func() bool {
			n, err := admin.CoreV1().Nodes().Get(ctx, "base", metav1.GetOptions{})
			return err == nil && n.UID != old && condStatus(n, "ConfigOK") == corev1.ConditionTrue
		}, "registered again")
		check(e.node(t, "base"))
	})

	t.Run("ConflictRereadsOnce", func(t *testing.T) {
		p := nodestatustest.NewProvider(testNode("conflict"))
		cs, tc := countedClient(t, a.Config())
		c := start(t, nodestatus.Config{Client: cs, Node: testNode("conflict"), Provider: p, Clock: newClock()})
		waitReady(t, c)
		gets, patches := tc.get("GET nodes"), tc.get("PATCH nodes/status")
		// Someone else writes the node: our copy is stale now.
		n := e.node(t, "conflict")
		n.Labels["theirs"] = "x"
		_, err := admin.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
		require.NoError(t, err)

		p.UpdateStatus(func(n *corev1.Node) { n.Labels["ours"] = "y" })
		waitNode(t, admin, "conflict", func(n *corev1.Node) bool { return n.Labels["ours"] == "y" }, "change written")
		require.Equal(t, gets+1, tc.get("GET nodes"), "one GET after the 409")
		require.Equal(t, patches+2, tc.get("PATCH nodes/status"), "the 409 and the retry")
		require.Equal(t, "x", e.node(t, "conflict").Labels["theirs"])
	})

	t.Run("LeaseConflictRereadsOnce", func(t *testing.T) {
		cs, tc := countedClient(t, a.Config())
		clk := newClock()
		c := start(t, nodestatus.Config{Client: cs, Node: testNode("lconflict"), Clock: clk})
		waitReady(t, c)
		idle(t, clk)
		// Someone else takes the lease: our copy is stale now.
		l := e.lease(t, "lconflict")
		l.Spec.HolderIdentity = ptrTo("intruder")
		_, err := admin.CoordinationV1().Leases("kube-node-lease").Update(ctx, l, metav1.UpdateOptions{})
		require.NoError(t, err)
		gets, puts := tc.get("GET leases"), tc.get("PUT leases")
		step(t, clk, 10500*time.Millisecond)
		eventually(t, nil, func() bool { return *e.lease(t, "lconflict").Spec.HolderIdentity == "lconflict" }, "lease taken back")
		idle(t, clk)
		require.Equal(t, gets+1, tc.get("GET leases"), "one GET after the 409")
		require.Equal(t, puts+2, tc.get("PUT leases"), "the 409 and the retry")
	})

	// An administrator deletes the node's Lease alone, mid-heartbeat: the
	// next renewal (RenewInterval later, not sooner: nothing watches the
	// Lease) finds it gone, reads the Node and creates the Lease again,
	// owned by it (a PUT answered 404, a GET of the Node, a POST), then
	// checks the Node as after any recreation (a GET and at most one status
	// patch): six requests at most, once, and the renewal after it is one
	// PUT again.
	t.Run("LeaseDeletedAloneIsRecreatedAtTheNextRenewal", func(t *testing.T) {
		cs, tc := countedClient(t, a.Config())
		clk := newClock()
		c := start(t, nodestatus.Config{Client: cs, Node: testNode("ldeleted"), Clock: clk, RenewJitter: -1})
		waitReady(t, c)
		idle(t, clk)
		old := e.lease(t, "ldeleted")
		require.NoError(t, admin.CoordinationV1().Leases("kube-node-lease").Delete(ctx, "ldeleted", metav1.DeleteOptions{}))
		before, deleted := tc.snapshot(), clk.Now()
		step(t, clk, 10*time.Second)
		eventually(t, nil, func() bool {
			l, err := admin.CoordinationV1().Leases("kube-node-lease").Get(ctx, "ldeleted", metav1.GetOptions{})
			return err == nil && l.UID != old.UID
		}, "the lease created again at the next renewal")
		idle(t, clk)
		after := tc.snapshot()
		t.Logf("recreated %v after the delete (fake clock); requests meanwhile: %v -> %v", clk.Since(deleted), before, after)
		sent := 0
		for k, n := range after {
			sent += n - before[k]
		}
		require.Equal(t, 1, after["PUT leases"]-before["PUT leases"], "the renewal that found it gone")
		require.Equal(t, 1, after["POST leases"]-before["POST leases"], "created again once")
		require.LessOrEqual(t, after["GET nodes"]-before["GET nodes"], 2, "reads of the Node")
		require.LessOrEqual(t, after["PATCH nodes/status"]-before["PATCH nodes/status"], 1, "status patches")
		require.LessOrEqual(t, sent, 6, "requests to recreate the lease")
		l := e.lease(t, "ldeleted")
		require.Len(t, l.OwnerReferences, 1)
		require.Equal(t, e.node(t, "ldeleted").UID, l.OwnerReferences[0].UID, "owned by the Node")
		puts := after["PUT leases"]
		step(t, clk, 10*time.Second)
		eventually(t, nil, func() bool { return tc.get("PUT leases") > puts }, "the next renewal")
		idle(t, clk)
		require.Equal(t, puts+1, tc.get("PUT leases"))
		require.Equal(t, after["POST leases"], tc.get("POST leases"), "the renewal after it creates nothing")
	})

	t.Run("UnchangedStatusSendsNoPatch", func(t *testing.T) {
		cs, tc := countedClient(t, a.Config())
		clk := newClock()
		c := start(t, nodestatus.Config{Client: cs, Node: testNode("quiet"), Clock: clk})
		waitReady(t, c)
		idle(t, clk)
		before := tc.snapshot()
		for range 14 { // 147 simulated seconds, before the first report (2.5 to 5 minutes after registration)
			step(t, clk, 10500*time.Millisecond)
			idle(t, clk)
		}
		after := tc.snapshot()
		require.Equal(t, before["PATCH nodes/status"], after["PATCH nodes/status"], "no status PATCH")
		require.Equal(t, before["GET nodes"], after["GET nodes"], "no GET")
		require.Equal(t, before["GET leases"], after["GET leases"], "no lease GET")
		require.Equal(t, 14, after["PUT leases"]-before["PUT leases"], "one renewal per step")
		total := func(m map[string]int) (s int) {
			for _, v := range m {
				s += v
			}
			return s
		}
		require.Equal(t, 14, total(after)-total(before), "nothing but renewals: %v -> %v", before, after)
	})

	t.Run("NodeDeletedIsRecreated", func(t *testing.T) {
		p := nodestatustest.NewProvider(testNode("phoenix"))
		cs, _ := countedClient(t, a.Config())
		clk := newClock()
		c := start(t, nodestatus.Config{Client: cs, Node: testNode("phoenix"), Provider: p, Clock: clk, ReRegister: true})
		waitReady(t, c)
		old := e.node(t, "phoenix").UID

		// Deleted by someone else; its lease goes with it, as the garbage
		// collector would do through the owner reference.
		require.NoError(t, admin.CoreV1().Nodes().Delete(ctx, "phoenix", metav1.DeleteOptions{}))
		require.NoError(t, admin.CoordinationV1().Leases("kube-node-lease").Delete(ctx, "phoenix", metav1.DeleteOptions{}))
		step(t, clk, 10500*time.Millisecond) // the next renewal finds the lease gone
		var uid types.UID
		eventually(t, nil, func() bool {
			n, err := admin.CoreV1().Nodes().Get(ctx, "phoenix", metav1.GetOptions{})
			if err != nil {
				return false
			}
			uid = n.UID
			return uid != old
		}, "node registered again")
		eventually(t, nil, func() bool {
			l, err := admin.CoordinationV1().Leases("kube-node-lease").Get(ctx, "phoenix", metav1.GetOptions{})
			return err == nil && len(l.OwnerReferences) == 1 && l.OwnerReferences[0].UID == uid
		}, "lease recreated, owned by the new node")

		// Deleted alone (the lease stays): the next status write notices.
		require.NoError(t, admin.CoreV1().Nodes().Delete(ctx, "phoenix", metav1.DeleteOptions{}))
		p.UpdateStatus(func(n *corev1.Node) { n.Labels["gen"] = "3" })
		eventually(t, nil, func() bool {
			n, err := admin.CoreV1().Nodes().Get(ctx, "phoenix", metav1.GetOptions{})
			return err == nil && n.UID != uid && n.Labels["gen"] == "3"
		}, "node registered again")
		uid = e.node(t, "phoenix").UID
		eventually(t, nil, func() bool { return e.lease(t, "phoenix").OwnerReferences[0].UID == uid }, "owner reference refreshed")
	})

	t.Run("NodeDeletedWithoutReRegister", func(t *testing.T) {
		p := nodestatustest.NewProvider(testNode("gone"))
		cs, _ := countedClient(t, a.Config())
		c := start(t, nodestatus.Config{Client: cs, Node: testNode("gone"), Provider: p, Clock: newClock()})
		waitReady(t, c)
		require.NoError(t, admin.CoreV1().Nodes().Delete(ctx, "gone", metav1.DeleteOptions{}))
		p.UpdateStatus(func(n *corev1.Node) { n.Labels["gen"] = "2" })
		select {
		case <-c.Done():
		case <-time.After(waitFor):
			t.Fatal("Run did not stop")
		}
		require.ErrorIs(t, c.Err(), nodestatus.ErrNodeDeleted)
	})

	t.Run("PingFailureSetsNotReady", func(t *testing.T) {
		p := nodestatustest.NewProvider(testNode("sick"))
		cs, _ := countedClient(t, a.Config())
		clk := newClock()
		c := start(t, nodestatus.Config{Client: cs, Node: testNode("sick"), Provider: p, Clock: clk})
		waitReady(t, c)
		renewed := e.lease(t, "sick").Spec.RenewTime.Time
		p.SetPingError(errors.New("backend: connection refused"))
		step(t, clk, 10500*time.Millisecond)
		eventually(t, nil, func() bool {
			r := condition(e.node(t, "sick"), corev1.NodeReady)
			return r.Status == corev1.ConditionFalse && r.Reason == nodestatus.ReasonPingFailed && strings.Contains(r.Message, "connection refused")
		}, "Ready=False")
		eventually(t, nil, func() bool { return e.lease(t, "sick").Spec.RenewTime.After(renewed) }, "the lease is still renewed")
		p.SetPingError(nil)
		step(t, clk, 10500*time.Millisecond)
		waitNode(t, admin, "sick", nodestatustest.ConditionIs(corev1.NodeReady, corev1.ConditionTrue, ""), "Ready again")
	})

	t.Run("ShutdownCordonThenUncordon", func(t *testing.T) {
		cs, _ := countedClient(t, a.Config())
		cfg := nodestatus.Config{Client: cs, Node: testNode("cordon"), Clock: newClock(), OnShutdown: nodestatus.ShutdownCordon}
		c := start(t, cfg)
		waitReady(t, c)
		require.NoError(t, c.stop(t), "Run returns nil when its context ends")
		n := e.node(t, "cordon")
		require.True(t, n.Spec.Unschedulable)
		require.Equal(t, "true", n.Annotations[nodestatus.AnnotationCordoned])

		c2 := start(t, cfg)
		waitReady(t, c2)
		n = e.node(t, "cordon")
		require.False(t, n.Spec.Unschedulable, "our own cordon is undone")
		require.NotContains(t, n.Annotations, nodestatus.AnnotationCordoned)
	})

	t.Run("ShutdownDelete", func(t *testing.T) {
		cs, _ := countedClient(t, a.Config())
		c := start(t, nodestatus.Config{Client: cs, Node: testNode("bye"), Clock: newClock(), OnShutdown: nodestatus.ShutdownDelete})
		waitReady(t, c)
		require.NoError(t, c.stop(t), "Run returns nil when its context ends")
		_, err := admin.CoreV1().Nodes().Get(ctx, "bye", metav1.GetOptions{})
		require.True(t, apierrors.IsNotFound(err), "node deleted: %v", err)
		_, err = admin.CoordinationV1().Leases("kube-node-lease").Get(ctx, "bye", metav1.GetOptions{})
		require.True(t, apierrors.IsNotFound(err), "lease deleted: %v", err)
	})

	t.Run("LastAppliedCorruptedLosesNothing", func(t *testing.T) {
		p := nodestatustest.NewProvider(testNode("corrupt"))
		cs, _ := countedClient(t, a.Config())
		c := start(t, nodestatus.Config{Client: cs, Node: testNode("corrupt"), Provider: p, Clock: newClock()})
		waitReady(t, c)
		n := e.node(t, "corrupt")
		n.Annotations[nodestatus.AnnotationLastApplied] = `{"v":1,"labels":{"bad key!":"x"}}`
		n.Labels["theirs"] = "kept"
		_, err := admin.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
		require.NoError(t, err)
		p.UpdateStatus(func(n *corev1.Node) { n.Labels["gen"] = "2" })
		waitNode(t, admin, "corrupt", func(n *corev1.Node) bool { return n.Labels["gen"] == "2" }, "written despite the bad record")
		n = e.node(t, "corrupt")
		require.Equal(t, "kept", n.Labels["theirs"])
		var rec map[string]any
		require.NoError(t, json.Unmarshal([]byte(n.Annotations[nodestatus.AnnotationLastApplied]), &rec), "a good record is written back")
	})

	t.Run("DualStackAddressesReplaced", func(t *testing.T) {
		n0 := testNode("dual")
		n0.Status.Addresses = nodeAddrs("10.0.0.1", "fd00::1")
		p := nodestatustest.NewProvider(n0)
		cs, tc := countedClient(t, a.Config())
		clk := newClock()
		c := start(t, nodestatus.Config{Client: cs, Node: n0, Provider: p, Clock: clk})
		waitReady(t, c)
		require.Equal(t, nodeAddrs("10.0.0.1", "fd00::1"), e.node(t, "dual").Status.Addresses)
		for _, step := range [][]string{
			{"10.0.0.2", "fd00::2"}, // both families change
			{"10.0.0.1"},            // dual-stack to single
			{"10.0.0.3", "fd00::3"}, // single to dual-stack
			{"fd00::3", "10.0.0.3"}, // the primary family changes
		} {
			p.UpdateStatus(func(n *corev1.Node) { n.Status.Addresses = nodeAddrs(step...) })
			eventually(t, nil, func() bool {
				return equality.Semantic.DeepEqual(nodeAddrs(step...), e.node(t, "dual").Status.Addresses)
			}, fmt.Sprintf("addresses %v", step))
		}
		// The same addresses notified again are not written again.
		noPatchesUntilMarker(t, p, tc, func() { step(t, clk, 10500*time.Millisecond) })
		require.Equal(t, nodeAddrs("fd00::3", "10.0.0.3"), e.node(t, "dual").Status.Addresses)
	})

	t.Run("OthersFieldsSurviveAndUnchangedStatusIsNotWritten", func(t *testing.T) {
		p := nodestatustest.NewProvider(testNode("others"))
		cs, tc := countedClient(t, a.Config())
		clk := newClock()
		c := start(t, nodestatus.Config{Client: cs, Node: testNode("others"), Provider: p, Clock: clk})
		waitReady(t, c)
		// Others write a condition (in front of ours), nodeInfo,
		// daemonEndpoints, a label and a taint, as the kubelet's
		// neighbours and the node lifecycle controller do.
		n := e.node(t, "others")
		n.Status.Conditions = append([]corev1.NodeCondition{{Type: "ExternalCheck", Status: corev1.ConditionTrue, Reason: "Fine", LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}, n.Status.Conditions...)
		n.Status.NodeInfo.KubeletVersion = "v1.37.1"
		n.Status.DaemonEndpoints.KubeletEndpoint.Port = 10250
		n, err := admin.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
		require.NoError(t, err)
		n.Labels["theirs"] = "x"
		n.Spec.Taints = append(n.Spec.Taints, corev1.Taint{Key: "example.com/theirs", Effect: corev1.TaintEffectNoSchedule})
		_, err = admin.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
		require.NoError(t, err)
		// One change makes the controller hold a copy with all of it.
		p.UpdateStatus(func(n *corev1.Node) { n.Labels["gen"] = "1" })
		waitNode(t, admin, "others", func(n *corev1.Node) bool { return n.Labels["gen"] == "1" }, "change written")

		noPatchesUntilMarker(t, p, tc, func() { step(t, clk, 10500*time.Millisecond) })
		n = e.node(t, "others")
		require.NotNil(t, condition(n, "ExternalCheck"), "their condition")
		require.Equal(t, "ExternalCheck", string(n.Status.Conditions[0].Type), "in their order")
		require.Equal(t, "v1.37.1", n.Status.NodeInfo.KubeletVersion, "their nodeInfo")
		require.EqualValues(t, 10250, n.Status.DaemonEndpoints.KubeletEndpoint.Port, "their daemonEndpoints")
		require.Equal(t, "x", n.Labels["theirs"], "their label")
		require.Contains(t, n.Spec.Taints, corev1.Taint{Key: "example.com/theirs", Effect: corev1.TaintEffectNoSchedule}, "their taint")
	})

	t.Run("InvalidStatusIsReducedNotRetried", func(t *testing.T) {
		p := nodestatustest.NewProvider(testNode("invalid"))
		cs, _ := countedClient(t, a.Config())
		clk := newClock()
		rec := &recorder{}
		c := start(t, nodestatus.Config{Client: cs, Node: testNode("invalid"), Provider: p, Clock: clk, ErrorHandler: rec.handle, Metrics: rec})
		waitReady(t, c)
		// A provider bug: an invalid label value, with a real change.
		p.UpdateStatus(func(n *corev1.Node) {
			n.Labels["bad"] = "not a valid value!"
			setCondition(n, corev1.NodeMemoryPressure, corev1.ConditionTrue, "Squeezed")
		})
		eventually(t, nil, func() bool {
			return condStatus(e.node(t, "invalid"), corev1.NodeMemoryPressure) == corev1.ConditionTrue
		}, "the status is written without the bad label")
		require.NotContains(t, e.node(t, "invalid").Labels, "bad")
		require.True(t, rec.sawRejected(apierrors.IsInvalid), "the error handler saw the 422: %v", rec.errors())
		require.Positive(t, rec.count(nodestatus.CallPatchStatus, nodestatus.OutcomeRejected), "the metrics hook saw the rejection")

		expectPingFailureAndCorrection(t, e, p, clk, "invalid")
	})

	t.Run("ForbiddenLabelIsReducedNotRetried", func(t *testing.T) {
		forbidLabel(t, admin, "example.com/forbidden")
		p := nodestatustest.NewProvider(testNode("forbidden"))
		cs, _ := countedClient(t, a.Config())
		clk := newClock()
		rec := &recorder{}
		c := start(t, nodestatus.Config{Client: cs, Node: testNode("forbidden"), Provider: p, Clock: clk, ErrorHandler: rec.handle, Metrics: rec})
		waitReady(t, c)
		p.UpdateStatus(func(n *corev1.Node) {
			n.Labels["example.com/forbidden"] = "yes"
			setCondition(n, corev1.NodeMemoryPressure, corev1.ConditionTrue, "Squeezed")
		})
		eventually(t, nil, func() bool {
			return condStatus(e.node(t, "forbidden"), corev1.NodeMemoryPressure) == corev1.ConditionTrue
		}, "the status is written without the forbidden label")
		require.True(t, rec.sawRejected(apierrors.IsForbidden), "the error handler saw the 403: %v", rec.errors())
		expectPingFailureAndCorrection(t, e, p, clk, "forbidden")
		require.NotContains(t, e.node(t, "forbidden").Labels, "example.com/forbidden")
	})

	t.Run("OversizedAnnotationsAreReducedNotRetried", func(t *testing.T) {
		p := nodestatustest.NewProvider(testNode("huge"))
		cs, _ := countedClient(t, a.Config())
		clk := newClock()
		rec := &recorder{}
		c := start(t, nodestatus.Config{Client: cs, Node: testNode("huge"), Provider: p, Clock: clk, ErrorHandler: rec.handle, Metrics: rec})
		waitReady(t, c)
		p.UpdateStatus(func(n *corev1.Node) {
			n.Annotations["example.com/blob"] = strings.Repeat("x", 300<<10)
			setCondition(n, corev1.NodeMemoryPressure, corev1.ConditionTrue, "Squeezed")
		})
		waitNode(t, admin, "huge", nodestatustest.ConditionIs(corev1.NodeMemoryPressure, corev1.ConditionTrue, ""), "the status is written without the annotation")
		require.True(t, rec.sawRejected(func(error) bool { return true }), "the error handler saw the rejection: %v", rec.errors())
		expectPingFailureAndCorrection(t, e, p, clk, "huge")
	})

	t.Run("ReRegisterUsesNotifiedSpec", func(t *testing.T) {
		p := nodestatustest.NewProvider(testNode("respec"))
		cs, _ := countedClient(t, a.Config())
		clk := newClock()
		c := start(t, nodestatus.Config{Client: cs, Node: testNode("respec"), Provider: p, Clock: clk, ReRegister: true})
		waitReady(t, c)
		newTaint := corev1.Taint{Key: "example.com/generation", Value: "2", Effect: corev1.TaintEffectNoSchedule}
		p.UpdateStatus(func(n *corev1.Node) {
			n.Spec.Taints = []corev1.Taint{newTaint}
			n.Labels["gen"] = "2"
		})
		waitNode(t, admin, "respec", func(n *corev1.Node) bool { return n.Labels["gen"] == "2" }, "notified")
		old := e.node(t, "respec").UID
		require.NoError(t, admin.CoreV1().Nodes().Delete(ctx, "respec", metav1.DeleteOptions{}))
		require.NoError(t, admin.CoordinationV1().Leases("kube-node-lease").Delete(ctx, "respec", metav1.DeleteOptions{}))
		step(t, clk, 10500*time.Millisecond)
		eventually(t, nil, func() bool {
			n, err := admin.CoreV1().Nodes().Get(ctx, "respec", metav1.GetOptions{})
			return err == nil && n.UID != old
		}, "registered again")
		require.Contains(t, e.node(t, "respec").Spec.Taints, newTaint, "with the notified spec")
		require.Contains(t, e.node(t, "respec").Spec.Taints, testNode("respec").Spec.Taints[0], "laid over Config.Node's")
	})

	t.Run("AdminCordonAfterUncordonIsKept", func(t *testing.T) {
		cs, _ := countedClient(t, a.Config())
		cfg := nodestatus.Config{Client: cs, Node: testNode("admincordon"), Clock: newClock(), OnShutdown: nodestatus.ShutdownCordon}
		c := start(t, cfg)
		waitReady(t, c)
		require.NoError(t, c.stop(t), "Run returns nil when its context ends")
		require.True(t, e.node(t, "admincordon").Spec.Unschedulable)
		// kubectl uncordon, which leaves our mark, then a later kubectl
		// cordon (or drain): the cordon is the administrator's now.
		kubectl := metav1.PatchOptions{FieldManager: "kubectl-cordon"}
		_, err := admin.CoreV1().Nodes().Patch(ctx, "admincordon", types.StrategicMergePatchType, []byte(`{"spec":{"unschedulable":null}}`), kubectl)
		require.NoError(t, err)
		_, err = admin.CoreV1().Nodes().Patch(ctx, "admincordon", types.StrategicMergePatchType, []byte(`{"spec":{"unschedulable":true}}`), kubectl)
		require.NoError(t, err)
		require.Contains(t, e.node(t, "admincordon").Annotations, nodestatus.AnnotationCordoned, "kubectl leaves the mark")

		c2 := start(t, cfg)
		waitReady(t, c2)
		eventually(t, nil, func() bool { _, ok := e.node(t, "admincordon").Annotations[nodestatus.AnnotationCordoned]; return !ok }, "the stale mark is removed")
		require.True(t, e.node(t, "admincordon").Spec.Unschedulable, "the administrator's cordon is kept")
	})

	t.Run("CordonWithoutMarkIsKept", func(t *testing.T) {
		// Our cordon, whose mark an administrator removed to keep the
		// node cordoned: this controller still owns spec.unschedulable,
		// but without the mark the cordon is no longer its own.
		cs, _ := countedClient(t, a.Config())
		cfg := nodestatus.Config{Client: cs, Node: testNode("unmarked"), Clock: newClock(), OnShutdown: nodestatus.ShutdownCordon}
		c := start(t, cfg)
		waitReady(t, c)
		require.NoError(t, c.stop(t), "Run returns nil when its context ends")
		_, err := admin.CoreV1().Nodes().Patch(ctx, "unmarked", types.StrategicMergePatchType,
			fmt.Appendf(nil, `{"metadata":{"annotations":{%q:null}}}`, nodestatus.AnnotationCordoned), metav1.PatchOptions{FieldManager: "kubectl-annotate"})
		require.NoError(t, err)
		require.True(t, e.node(t, "unmarked").Spec.Unschedulable)

		c2 := start(t, cfg)
		waitReady(t, c2) // after the first status job, which undoes our own cordon
		require.True(t, e.node(t, "unmarked").Spec.Unschedulable, "a cordon without the mark is kept")
	})

	t.Run("AdminCordonGetsNoMark", func(t *testing.T) {
		// An administrator cordons the node while the controller runs:
		// the shutdown cordon leaves it alone, and marks nothing.
		cs, _ := countedClient(t, a.Config())
		cfg := nodestatus.Config{Client: cs, Node: testNode("admin-first"), Clock: newClock(), OnShutdown: nodestatus.ShutdownCordon}
		c := start(t, cfg)
		waitReady(t, c)
		_, err := admin.CoreV1().Nodes().Patch(ctx, "admin-first", types.StrategicMergePatchType, []byte(`{"spec":{"unschedulable":true}}`), metav1.PatchOptions{FieldManager: "kubectl-cordon"})
		require.NoError(t, err)
		require.NoError(t, c.stop(t), "Run returns nil when its context ends")
		require.NotContains(t, e.node(t, "admin-first").Annotations, nodestatus.AnnotationCordoned, "no mark on the administrator's cordon")

		c2 := start(t, cfg)
		waitReady(t, c2)
		require.True(t, e.node(t, "admin-first").Spec.Unschedulable, "the administrator's cordon is kept")
	})

	t.Run("StatusRestoredAtOnceAfterFailedHeartbeats", func(t *testing.T) {
		px := testenv.Proxy(t, a.Addr())
		cs, _ := countedClient(t, a.ConfigFor(px.Addr()))
		clk := newClock()
		rec := &recorder{}
		c := start(t, nodestatus.Config{Client: cs, Node: testNode("partition"), Clock: clk, RequestTimeout: 2 * time.Second, Metrics: rec})
		waitReady(t, c)
		idle(t, clk)
		px.Cut()
		// Renewals hang and fail (2s of real time each) while the node
		// lifecycle controller marks every condition Unknown.
		for range 3 {
			step(t, clk, 5*time.Second)
		}
		// A renewal times out on the real clock (RequestTimeout), so the
		// controller can look idle on the fake clock while one still
		// hangs: wait for the failure itself.
		eventually(t, nil, func() bool {
			return rec.count(nodestatus.CallUpdateLease, nodestatus.OutcomeTransient) > 0
		}, "renewals failed during the cut")
		idle(t, clk)
		n := e.node(t, "partition")
		for i := range n.Status.Conditions {
			n.Status.Conditions[i].Status = corev1.ConditionUnknown
			n.Status.Conditions[i].Reason = "NodeStatusUnknown"
		}
		_, err := admin.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
		require.NoError(t, err)
		px.Restore()
		// The next retry comes within retryMaxWait (5s); once the renewal
		// succeeds, the status is restored without any further step of the
		// clock: no report or renew interval is waited for.
		step(t, clk, 5*time.Second)
		eventually(t, nil, func() bool {
			n := e.node(t, "partition")
			for _, typ := range []corev1.NodeConditionType{corev1.NodeReady, corev1.NodeMemoryPressure, corev1.NodeDiskPressure, corev1.NodePIDPressure} {
				want := corev1.ConditionFalse
				if typ == corev1.NodeReady {
					want = corev1.ConditionTrue
				}
				if condStatus(n, typ) != want {
					return false
				}
			}
			return true
		}, "status restored after the first successful renewal")
	})

	t.Run("ReportRestoresWhatOthersChanged", func(t *testing.T) {
		// While heartbeats succeed, nothing reads the Node back but the
		// report: its resourceVersion precondition fails on any change by
		// others, and the report is recomputed on a fresh copy.
		cs, tc := countedClient(t, a.Config())
		clk := newClock()
		c := start(t, nodestatus.Config{Client: cs, Node: testNode("report"), Clock: clk, StatusReportInterval: time.Minute})
		waitReady(t, c)
		idle(t, clk)
		n := e.node(t, "report")
		for i := range n.Status.Conditions {
			n.Status.Conditions[i].Status = corev1.ConditionUnknown
		}
		_, err := admin.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
		require.NoError(t, err)
		gets := tc.get("GET nodes")
		for range 7 { // 73.5s: past the first report, due 30s to 60s after registration
			step(t, clk, 10500*time.Millisecond)
		}
		eventually(t, nil, func() bool {
			n := e.node(t, "report")
			return condStatus(n, corev1.NodeReady) == corev1.ConditionTrue && condStatus(n, corev1.NodeDiskPressure) == corev1.ConditionFalse
		}, "the report restored the status")
		require.Equal(t, gets+1, tc.get("GET nodes"), "one GET, after the 409")
	})

	t.Run("LeaseClientCarriesOnlyRenewals", func(t *testing.T) {
		cs, tc := countedClient(t, a.Config())
		lcs, ltc := countedClient(t, a.Config())
		clk := newClock()
		c := start(t, nodestatus.Config{Client: cs, LeaseClient: lcs, Node: testNode("twoclients"), Clock: clk})
		waitReady(t, c)
		step(t, clk, 10500*time.Millisecond)
		idle(t, clk)
		for k := range tc.snapshot() {
			require.NotContains(t, k, "leases", "no lease request on the status client")
		}
		for k := range ltc.snapshot() {
			require.Contains(t, k, "leases", "only lease requests on the lease client")
		}
		require.GreaterOrEqual(t, ltc.get("PUT leases"), 1)
	})

	t.Run("LimiterBoundsRegistrationBurst", func(t *testing.T) {
		// Ten controllers on one client share a limiter of three; the
		// client holds every Node creation until the test opens it.
		gate := newRequestGate()
		cfg := a.Config()
		cfg.QPS, cfg.Burst = -1, 0
		cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
			return roundTripFunc(func(req *http.Request) (*http.Response, error) {
				if req.Method == http.MethodPost && strings.HasSuffix(req.URL.Path, "/nodes") {
					gate.pass(req.URL.Path)
				}
				return rt.RoundTrip(req)
			})
		}
		cs, err := kubernetes.NewForConfig(cfg)
		require.NoError(t, err)
		lim := newCountingLimiter(3)
		clk := newClock()
		var ctrls []*running
		for i := range 10 {
			ctrls = append(ctrls, start(t, nodestatus.Config{Client: cs, Node: testNode(fmt.Sprintf("burst-%d", i)), Clock: clk, Limiter: lim}))
		}
		lim.waitFor(t, 7, 3)
		require.Eventually(t, func() bool { f, _, _ := gate.counts(); return f == 3 }, waitFor, time.Millisecond, "three creations held")
		gate.openAndWait(t, ctrls, 3)
		for i := range 10 {
			require.Equal(t, corev1.ConditionTrue, condStatus(e.node(t, fmt.Sprintf("burst-%d", i)), corev1.NodeReady))
		}
		lim.waitFor(t, 0, 0)
	})

	// Last: restarting the server affects every controller still running.
	t.Run("APIServerRestartKeepsNodeReady", func(t *testing.T) {
		cs, _ := countedClient(t, a.Config())
		clk := newClock()
		c := start(t, nodestatus.Config{Client: cs, Node: testNode("restart"), Clock: clk})
		waitReady(t, c)
		idle(t, clk)
		rctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		before := e.lease(t, "restart").Spec.RenewTime.Time
		errc := make(chan error, 1)
		go func() { errc <- a.Restart(rctx) }()
		// A renewal while the server restarts fails and is retried with
		// backoff, on the fake clock that eventually keeps stepping.
		step(t, clk, 10500*time.Millisecond)
		require.NoError(t, recv(t, errc, "the apiserver restarts"))
		eventually(t, clk, func() bool { return e.lease(t, "restart").Spec.RenewTime.After(before) }, "lease renewed after restart")
		r := condition(e.node(t, "restart"), corev1.NodeReady)
		require.Equal(t, corev1.ConditionTrue, r.Status)
		select {
		case <-c.Done():
			t.Fatalf("Run stopped: %v", c.Err())
		default:
		}
	})
}
