package nodestatus_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sync/semaphore"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/kubernetes"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	k8stesting "k8s.io/client-go/testing"

	"github.com/reconkit/reconkit/kubefake"
	"github.com/reconkit/reconkit/nodestatus"
	"github.com/reconkit/reconkit/nodestatus/nodestatustest"
)

// nodeReads is a client whose Node GETs are recorded, and can be followed
// by a write of the test's own before the controller sees the answer: what
// the node lifecycle controller does when its Unknown lands just after the
// controller's read.
type nodeReads struct {
	kubernetes.Interface
	mu    sync.Mutex
	rvs   []string               // each GET's resourceVersion option
	after func(got *corev1.Node) // called once, after the next GET
}

func readsOf(cs kubernetes.Interface) *nodeReads { return &nodeReads{Interface: cs} }

func (r *nodeReads) CoreV1() corev1client.CoreV1Interface {
	return readsCore{CoreV1Interface: r.Interface.CoreV1(), r: r}
}

// afterNextRead has f called after the next GET of a Node returns, before
// the controller gets its answer.
func (r *nodeReads) afterNextRead(f func(got *corev1.Node)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.after = f
}

// reads returns the resourceVersion options of the GETs so far.
func (r *nodeReads) reads() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.rvs...)
}

type readsCore struct {
	corev1client.CoreV1Interface
	r *nodeReads
}

func (c readsCore) Nodes() corev1client.NodeInterface {
	return readsNodes{NodeInterface: c.CoreV1Interface.Nodes(), r: c.r}
}

type readsNodes struct {
	corev1client.NodeInterface
	r *nodeReads
}

func (n readsNodes) Get(ctx context.Context, name string, opts metav1.GetOptions) (*corev1.Node, error) {
	got, err := n.NodeInterface.Get(ctx, name, opts)
	n.r.mu.Lock()
	n.r.rvs = append(n.r.rvs, opts.ResourceVersion)
	after := n.r.after
	if err == nil {
		n.r.after = nil
	}
	n.r.mu.Unlock()
	if err == nil && after != nil {
		after(got)
	}
	return got, err
}

// markUnknown does what the node lifecycle controller does to a node it
// lost: every condition Unknown.
func markUnknown(t *testing.T, cs kubernetes.Interface, name string) {
	t.Helper()
	require.NoError(t, markUnknownErr(cs, name))
}

// markUnknownErr is markUnknown for goroutines other than the test's.
func markUnknownErr(cs kubernetes.Interface, name string) error {
	ctx := context.Background()
	n, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	for i := range n.Status.Conditions {
		n.Status.Conditions[i].Status = corev1.ConditionUnknown
		n.Status.Conditions[i].Reason = "NodeStatusUnknown"
	}
	_, err = cs.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
	return err
}

var readyTrue = nodestatustest.ConditionIs(corev1.NodeReady, corev1.ConditionTrue, "")

// With PingFailureStopHeartbeat, heartbeats that resume after the node
// lifecycle controller marked the Node Unknown are followed at once by a
// linearizable read of the Node and a heartbeat: Ready is back without
// waiting for the next status report, and without the clock moving.
func TestResumedHeartbeatsRestoreReady(t *testing.T) {
	cs := kubefake.NewClientset()
	client := readsOf(cs)
	clk := newFakeClock()
	p := nodestatustest.NewProvider(testNode("vk-0"))
	cfg := fakeConfig(cs, clk, p)
	cfg.Client = client
	cfg.PingFailure = nodestatus.PingFailureStopHeartbeat
	startReady(t, cfg)

	p.SetPingError(errors.New("down"))
	pings := p.Pings()
	step(t, clk, 10500*time.Millisecond)
	waitPings(t, p, pings+1)
	markUnknown(t, cs, "vk-0") // past the grace period
	reads := len(client.reads())

	p.SetPingError(nil)
	pings = p.Pings()
	step(t, clk, 10500*time.Millisecond)
	waitPings(t, p, pings+1)
	// The clock stands still from here: the heal alone must restore Ready.
	waitNode(t, cs, "vk-0", readyTrue, "Ready=True after heartbeats resumed")
	got := client.reads()[reads:]
	require.NotEmpty(t, got, "the Node was read after heartbeats resumed")
	require.Equal(t, "", got[0], "a linearizable read, not the apiserver's cache")
}

// After failed renewals, an Unknown the node lifecycle controller writes
// just after the controller's recovery read is overwritten: the recovery
// writes a heartbeat checked by resourceVersion, which the late Unknown
// makes fail with 409, and the Node is read and written again.
func TestRecoveryOverwritesUnknownWrittenAfterRead(t *testing.T) {
	cs := kubefake.NewClientset()
	faults := failLeaseUpdates(cs)
	client := readsOf(cs)
	clk := newFakeClock()
	cfg := fakeConfig(cs, clk, nodestatustest.NewProvider(testNode("vk-0")))
	cfg.Client = client
	startReady(t, cfg)

	faults.set(apierrors.NewServiceUnavailable("etcd is down"))
	step(t, clk, 10500*time.Millisecond) // the renewal that fails
	step(t, clk, 5*time.Second)          // and a retry
	injected := make(chan error, 1)
	client.afterNextRead(func(got *corev1.Node) {
		if !readyTrue(got) {
			injected <- errors.New("the read saw the Node after the Unknown")
			return
		}
		injected <- markUnknownErr(cs, "vk-0")
	})
	reads := len(client.reads())
	faults.set(nil)
	step(t, clk, 5*time.Second) // the retry that succeeds: the heal
	select {
	case err := <-injected:
		require.NoError(t, err)
	case <-time.After(waitFor):
		t.Fatal("the recovery read the Node never came")
	}
	// The clock stands still from here.
	waitNode(t, cs, "vk-0", readyTrue, "Ready=True after the late Unknown")
	got := client.reads()[reads:]
	require.GreaterOrEqual(t, len(got), 2, "read, 409, read again")
	for _, rv := range got {
		require.Equal(t, "", rv, "linearizable reads, not the apiserver's cache")
	}
}

// A lease deleted under the controller (by the garbage collector, or an
// administrator) is created again by the renewal itself, owned by the Node
// as read then, while every unit of the shared Limiter is taken: renewals
// never wait for it.
func TestVanishedLeaseRecreatedWithoutLimiter(t *testing.T) {
	cs := kubefake.NewClientset()
	v := countVerbs(cs)
	clk := newFakeClock()
	limiter := semaphore.NewWeighted(1)
	cfg := fakeConfig(cs, clk, nil)
	cfg.Limiter = limiter
	startReady(t, cfg)
	idle(t, clk)
	ctx := context.Background()
	require.NoError(t, limiter.Acquire(ctx, 1)) // status jobs wait from here
	defer limiter.Release(1)

	require.NoError(t, cs.CoordinationV1().Leases("kube-node-lease").Delete(ctx, "vk-0", metav1.DeleteOptions{}))
	created := v.get("create leases")
	stepWhileBusy(t, clk, 10500*time.Millisecond) // the renewal finds it gone
	require.Eventually(t, func() bool { return v.get("create leases") > created }, waitFor, time.Millisecond, "the lease is created again")
	l, err := cs.CoordinationV1().Leases("kube-node-lease").Get(ctx, "vk-0", metav1.GetOptions{})
	require.NoError(t, err)
	n, err := cs.CoreV1().Nodes().Get(ctx, "vk-0", metav1.GetOptions{})
	require.NoError(t, err)
	require.Len(t, l.OwnerReferences, 1)
	require.Equal(t, n.UID, l.OwnerReferences[0].UID, "owned by the Node")
}

// A status the API server refused for good is never sent again as it is:
// later reports write the reduced status only, with no new rejection, no
// ErrorHandler call and no Warning event, until the provider's status
// changes.
func TestRefusedStatusNotSentAgain(t *testing.T) {
	cs := kubefake.NewClientset()
	var mu sync.Mutex
	bad, reports := 0, 0
	cs.PrependReactor("patch", "nodes", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "status" {
			return false, nil, nil
		}
		mu.Lock()
		defer mu.Unlock()
		reports++
		if strings.Contains(string(a.(k8stesting.PatchAction).GetPatch()), `"bad":"label"`) {
			bad++
			return true, nil, apierrors.NewInvalid(schema.GroupKind{Kind: "Node"}, "vk-0", field.ErrorList{field.Invalid(field.NewPath("metadata", "labels"), "bad", "not allowed")})
		}
		return false, nil, nil
	})
	counts := func() (int, int) {
		mu.Lock()
		defer mu.Unlock()
		return bad, reports
	}
	clk := newFakeClock()
	p := nodestatustest.NewProvider(testNode("vk-0"))
	h, rec := &hooks{}, &recorder{}
	cfg := fakeConfig(cs, clk, p)
	cfg.Events, cfg.ErrorHandler = h, rec.handle
	cfg.StatusReportInterval = time.Minute
	startReady(t, cfg)

	p.UpdateStatus(func(n *corev1.Node) { n.Labels["bad"] = "label" })
	require.Eventually(t, func() bool { b, _ := counts(); return b == 1 && h.sawEvent("Warning "+nodestatus.EventStatusRejected) }, waitFor, time.Millisecond, "refused once")
	waitNode(t, cs, "vk-0", func(n *corev1.Node) bool { return n.Labels["bad"] == "" }, "the reduced status is written")
	handled, events := len(rec.errors()), len(h.events)
	_, before := counts()
	// Ten reports, each a write of the reduced status.
	stepUntil(t, clk, 10500*time.Millisecond, func() bool { _, r := counts(); return r >= before+10 })
	b, _ := counts()
	require.Equal(t, 1, b, "the refused status is not sent again")
	require.Equal(t, handled, len(rec.errors()), "no ErrorHandler call for what was not sent")
	h.mu.Lock()
	require.Equal(t, events, len(h.events), "no Warning event for what was not sent")
	h.mu.Unlock()

	// A change of the provider's status is tried in full again.
	p.UpdateStatus(func(n *corev1.Node) { n.Labels["other"] = "change" })
	require.Eventually(t, func() bool { b, _ := counts(); return b == 2 }, waitFor, time.Millisecond, "a changed status is tried in full")
	p.UpdateStatus(func(n *corev1.Node) { delete(n.Labels, "bad") })
	waitNode(t, cs, "vk-0", func(n *corev1.Node) bool { return n.Labels["other"] == "change" }, "the corrected status is written in full")
}
