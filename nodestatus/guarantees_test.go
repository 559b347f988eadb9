package nodestatus_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/reconkit/reconkit/kubefake"
	"github.com/reconkit/reconkit/nodestatus"
	"github.com/reconkit/reconkit/nodestatus/nodestatustest"
)

// A lease deleted under the controller is created again owned by the Node
// as it is now: the Node is read through the lease's client (renewals never
// queue behind status traffic), linearizably (resourceVersion unset, never
// the apiserver's cache, which may still serve a Node deleted and
// registered again under a new UID).
func TestVanishedLeaseOwnerReadLinearizablyThroughLeaseClient(t *testing.T) {
	cs := kubefake.NewClientset()
	statusReads, leaseReads := readsOf(cs), readsOf(cs)
	clk := newFakeClock()
	cfg := fakeConfig(cs, clk, nil)
	cfg.Client, cfg.LeaseClient = statusReads, leaseReads
	startReady(t, cfg)
	idle(t, clk)
	before := len(leaseReads.reads())

	ctx := context.Background()
	require.NoError(t, cs.CoordinationV1().Leases("kube-node-lease").Delete(ctx, "vk-0", metav1.DeleteOptions{}))
	step(t, clk, 10500*time.Millisecond) // the renewal finds it gone
	require.Eventually(t, func() bool {
		_, err := cs.CoordinationV1().Leases("kube-node-lease").Get(ctx, "vk-0", metav1.GetOptions{})
		return err == nil
	}, waitFor, time.Millisecond, "the lease is created again")
	got := leaseReads.reads()[before:]
	require.NotEmpty(t, got, "the Node is read through the lease client before the lease is created again")
	for _, rv := range got {
		require.Equal(t, "", rv, "a linearizable read, not the apiserver's cache")
	}
}

// A 429's Retry-After is honoured only up to the 5s the doc promises
// between attempts, jitter included: a hint of a minute does not hold a
// renewal back for a minute.
func TestRetryAfterHintCappedAtFiveSeconds(t *testing.T) {
	cs := kubefake.NewClientset()
	faults := failLeaseUpdates(cs)
	clk := newFakeClock()
	startReady(t, fakeConfig(cs, clk, nil))
	faults.set(apierrors.NewTooManyRequests("slow down", 60))
	step(t, clk, 10500*time.Millisecond) // the renewal that is throttled
	retriesWithin(t, clk, faults, 10, 5*time.Second)
}

// A Node deleted by someone else is not registered again without
// ReRegister: Run returns an error wrapping ErrNodeDeleted and the Node
// stays deleted.
func TestNodeDeletedWithoutReRegisterStopsRun(t *testing.T) {
	cs := kubefake.NewClientset()
	clk := newFakeClock()
	p := nodestatustest.NewProvider(testNode("vk-0"))
	c := startReady(t, fakeConfig(cs, clk, p))
	idle(t, clk)
	ctx := context.Background()
	require.NoError(t, cs.CoreV1().Nodes().Delete(ctx, "vk-0", metav1.DeleteOptions{}))
	p.UpdateStatus(func(n *corev1.Node) { n.Labels["gen"] = "2" })
	// Whichever comes first: Run stops, or the Node is registered again.
	require.Eventually(t, func() bool {
		select {
		case <-c.Done():
			return true
		default:
		}
		_, err := cs.CoreV1().Nodes().Get(ctx, "vk-0", metav1.GetOptions{})
		return err == nil
	}, waitFor, time.Millisecond)
	_, err := cs.CoreV1().Nodes().Get(ctx, "vk-0", metav1.GetOptions{})
	require.True(t, apierrors.IsNotFound(err), "the Node is not registered again: %v", err)
	recv(t, c.Done(), "Run returns")
	require.ErrorIs(t, c.Err(), nodestatus.ErrNodeDeleted)
}

// An unreadable last-applied record is ignored: the next write upserts
// what the provider reports, deletes nothing of others', and writes a
// good record back.
func TestUnreadableRecordIgnoredOnTheFake(t *testing.T) {
	cs := kubefake.NewClientset()
	clk := newFakeClock()
	p := nodestatustest.NewProvider(testNode("vk-0"))
	c := startReady(t, fakeConfig(cs, clk, p))
	idle(t, clk)
	ctx := context.Background()
	n, err := cs.CoreV1().Nodes().Get(ctx, "vk-0", metav1.GetOptions{})
	require.NoError(t, err)
	n.Annotations[nodestatus.AnnotationLastApplied] = `{"v":1,"labels":{"bad key!":"x"}}`
	n.Labels["theirs"] = "kept"
	_, err = cs.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
	require.NoError(t, err)
	p.UpdateStatus(func(n *corev1.Node) { n.Labels["gen"] = "2" })
	stepUntil(t, clk, 10500*time.Millisecond, func() bool {
		select {
		case <-c.Done(): // stopped: fail below, without waiting
			return true
		default:
		}
		n, err := cs.CoreV1().Nodes().Get(ctx, "vk-0", metav1.GetOptions{})
		return err == nil && n.Labels["gen"] == "2"
	})
	select {
	case <-c.Done():
		t.Fatalf("Run stopped: %v", c.Err())
	default:
	}
	n, err = cs.CoreV1().Nodes().Get(ctx, "vk-0", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "kept", n.Labels["theirs"], "nothing of others' is deleted")
	require.NotContains(t, n.Annotations[nodestatus.AnnotationLastApplied], "bad key!", "a good record is written back")
}

// Conditions the provider does not report (MemoryPressure, DiskPressure,
// PIDPressure by default) are reported False by the controller, and
// restored after the node lifecycle controller marked them Unknown.
func TestDefaultConditionsReportedFalse(t *testing.T) {
	cs := kubefake.NewClientset()
	clk := newFakeClock()
	p := nodestatustest.NewProvider(testNode("vk-0"))
	startReady(t, fakeConfig(cs, clk, p))
	defaultsFalse := func(n *corev1.Node) bool {
		for _, ct := range []corev1.NodeConditionType{corev1.NodeMemoryPressure, corev1.NodeDiskPressure, corev1.NodePIDPressure} {
			if !nodestatustest.ConditionIs(ct, corev1.ConditionFalse, "")(n) {
				return false
			}
		}
		return true
	}
	waitNode(t, cs, "vk-0", defaultsFalse, "default conditions False")
	idle(t, clk)
	markUnknown(t, cs, "vk-0")
	p.UpdateStatus(func(n *corev1.Node) { n.Labels["gen"] = "2" })
	stepUntil(t, clk, 10500*time.Millisecond, func() bool {
		n, err := cs.CoreV1().Nodes().Get(context.Background(), "vk-0", metav1.GetOptions{})
		return err == nil && n.Labels["gen"] == "2"
	})
	waitNode(t, cs, "vk-0", defaultsFalse, "default conditions False again after Unknown")
}

// After the lease vanished and was created again, the Node is read back at
// once, linearizably, and a heartbeat is written against that copy: what
// happened to the Node meanwhile (marked Unknown) is restored without
// waiting for the next status report.
func TestVanishedLeaseFollowedByNodeCheck(t *testing.T) {
	cs := kubefake.NewClientset()
	statusReads := readsOf(cs)
	clk := newFakeClock()
	cfg := fakeConfig(cs, clk, nil)
	cfg.Client = statusReads
	startReady(t, cfg)
	idle(t, clk)
	before := len(statusReads.reads())

	ctx := context.Background()
	markUnknown(t, cs, "vk-0")
	require.NoError(t, cs.CoordinationV1().Leases("kube-node-lease").Delete(ctx, "vk-0", metav1.DeleteOptions{}))
	step(t, clk, 10500*time.Millisecond) // the renewal finds it gone
	// The clock stands still from here.
	waitNode(t, cs, "vk-0", readyTrue, "Ready=True at once after the lease was created again")
	got := statusReads.reads()[before:]
	require.NotEmpty(t, got, "the Node is read back")
	for _, rv := range got {
		require.Equal(t, "", rv, "a linearizable read, not the apiserver's cache")
	}
}

// slowStop is a provider whose Ping, once its context ends, takes until
// release is closed to return.
type slowStop struct {
	*nodestatustest.Provider
	ended   chan struct{} // closed when a Ping saw its context end
	release chan struct{}
	once    sync.Once
}

func (p *slowStop) Ping(ctx context.Context) error {
	blockOnPurpose(ctx)
	<-ctx.Done()
	p.once.Do(func() { close(p.ended) })
	select {
	case <-p.release:
	case <-time.After(waitFor): // the test failed before releasing it
	}
	return ctx.Err()
}

// Run blocks until every goroutine it started has returned: a Ping still
// running when the context ends holds Run until it returns, and Run then
// returns nil.
func TestRunWaitsForItsGoroutines(t *testing.T) {
	cs := kubefake.NewClientset()
	clk := newFakeClock()
	p := &slowStop{Provider: nodestatustest.NewProvider(testNode("vk-0")), ended: make(chan struct{}), release: make(chan struct{})}
	c := startReady(t, fakeConfig(cs, clk, p))
	c.cancel()
	recv(t, p.ended, "the Ping sees its context end")
	require.Never(t, func() bool {
		select {
		case <-c.Done():
			return true
		default:
			return false
		}
	}, 200*time.Millisecond, time.Millisecond, "Run returned while its Ping was still running")
	close(p.release)
	recv(t, c.Done(), "Run returns once its Ping did")
	require.NoError(t, c.Err(), "the end of the context is a clean stop")
}

// The discovery that confirms a missing Lease API (after an unnamed 404
// for the lease) is part of the renewal, and bounded by RequestTimeout
// like its other requests: a discovery that hangs does not stop the
// heartbeat for good.
func TestLeaseDiscoveryBoundedByRequestTimeout(t *testing.T) {
	cancelled := make(chan struct{}, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/apis/coordination.k8s.io/v1" {
			select {
			case <-r.Context().Done():
				select {
				case cancelled <- struct{}{}:
				default:
				}
			case <-time.After(waitFor):
			}
			return
		}
		// Every lease request: an unnamed 404, as a misrouting proxy may
		// answer.
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprint(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"the server could not find the requested resource","reason":"NotFound","code":404}`)
	}))
	t.Cleanup(srv.Close) // after the controller stopped: cleanups run last first
	leases, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL})
	require.NoError(t, err)
	cfg := fakeConfig(kubefake.NewClientset(), newFakeClock(), nil)
	cfg.LeaseClient, cfg.RequestTimeout = leases, time.Second
	start(t, cfg)
	recv(t, cancelled, "the hung discovery cancelled at RequestTimeout")
}
