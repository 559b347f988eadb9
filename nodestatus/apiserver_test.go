package nodestatus_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
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
// given) so that retries and renewals can happen.
func eventually(t *testing.T, clk *testclock.FakeClock, cond func() bool, msg string) {
	t.Helper()
	require.Eventually(t, func() bool {
		if cond() {
			return true
		}
		if clk != nil {
			clk.Step(100 * time.Millisecond)
		}
		return false
	}, waitFor, 20*time.Millisecond, msg)
}

func ptrTo[T any](v T) *T { return &v }

func newClock() *testclock.FakeClock {
	return testclock.NewFakeClock(time.Now().Truncate(time.Second))
}

func TestAPIServer(t *testing.T) {
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
		c := start(t, nodestatus.Config{Client: cs, Node: base, Provider: p, Clock: newClock()})
		waitReady(t, c)
		n := e.node(t, "abc")
		require.NotNil(t, condition(n, "B"))

		n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{Type: "C", Status: corev1.ConditionTrue, Reason: "C", LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()})
		_, err := admin.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
		require.NoError(t, err)

		p.UpdateStatus(func(n *corev1.Node) { n.Status.Conditions = n.Status.Conditions[:1] })
		eventually(t, nil, func() bool { return condition(e.node(t, "abc"), "B") == nil }, "B deleted")
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
			delete(n.Labels, "kubernetes.io/role")
			n.Labels["new"] = "1"
			delete(n.Annotations, "example.com/provider")
		})
		eventually(t, nil, func() bool { return e.node(t, "own").Labels["new"] == "1" }, "new label")
		n = e.node(t, "own")
		require.NotContains(t, n.Labels, "kubernetes.io/role", "our removed label is deleted")
		require.NotContains(t, n.Annotations, "example.com/provider", "our removed annotation is deleted")
		require.Equal(t, "x", n.Labels["theirs"])
		require.Equal(t, "y", n.Annotations["example.com/theirs"])
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
		eventually(t, nil, func() bool { return e.node(t, "conflict").Labels["ours"] == "y" }, "change written")
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
		c := start(t, nodestatus.Config{Client: cs, Node: testNode("phoenix"), Provider: p, Clock: clk})
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
		c := start(t, nodestatus.Config{Client: cs, Node: testNode("gone"), Provider: p, Clock: newClock(), DisableReRegister: true})
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
		eventually(t, nil, func() bool { return condition(e.node(t, "sick"), corev1.NodeReady).Status == corev1.ConditionTrue }, "Ready again")
	})

	t.Run("ShutdownCordonThenUncordon", func(t *testing.T) {
		cs, _ := countedClient(t, a.Config())
		cfg := nodestatus.Config{Client: cs, Node: testNode("cordon"), Clock: newClock(), OnShutdown: nodestatus.ShutdownCordon}
		c := start(t, cfg)
		waitReady(t, c)
		require.ErrorIs(t, c.stop(t), context.Canceled)
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
		require.ErrorIs(t, c.stop(t), context.Canceled)
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
		eventually(t, nil, func() bool { return e.node(t, "corrupt").Labels["gen"] == "2" }, "written despite the bad record")
		n = e.node(t, "corrupt")
		require.Equal(t, "kept", n.Labels["theirs"])
		var rec map[string]any
		require.NoError(t, json.Unmarshal([]byte(n.Annotations[nodestatus.AnnotationLastApplied]), &rec), "a good record is written back")
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
		require.NoError(t, <-errc)
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
