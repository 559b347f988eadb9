package ccmtest

import (
	"context"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/api"

	"github.com/reconkit/reconkit/internal/testenv"
)

// stepTimeout bounds each wait on the controller: each step takes a
// second or two; one that does not happen fails by then.
const stepTimeout = time.Minute

// fakeLB provisions in two calls (a RetryError, then the status), and
// can hold EnsureLoadBalancer until its context ends.
type fakeLB struct {
	block    bool
	started  chan struct{} // closed at the first EnsureLoadBalancer
	ctxEnded chan struct{} // closed when the held call's context ended
	release  chan struct{} // the held call returns once it is closed

	mu      sync.Mutex
	ensures map[types.UID]int
	exists  map[types.UID]bool
	ctxErrs []error // each held call's context error, once it returned
	once    sync.Once
}

var _ cloudprovider.LoadBalancer = (*fakeLB)(nil)

func newFakeLB() *fakeLB {
	return &fakeLB{started: make(chan struct{}), ctxEnded: make(chan struct{}), release: make(chan struct{}), ensures: map[types.UID]int{}, exists: map[types.UID]bool{}}
}

func (f *fakeLB) GetLoadBalancer(_ context.Context, _ string, svc *v1.Service) (*v1.LoadBalancerStatus, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return &svc.Status.LoadBalancer, f.exists[svc.UID], nil
}

func (f *fakeLB) GetLoadBalancerName(_ context.Context, _ string, svc *v1.Service) string {
	return cloudprovider.DefaultLoadBalancerName(svc)
}

func (f *fakeLB) EnsureLoadBalancer(ctx context.Context, _ string, svc *v1.Service, nodes []*v1.Node) (*v1.LoadBalancerStatus, error) {
	f.once.Do(func() { close(f.started) })
	if f.block {
		<-ctx.Done()
		close(f.ctxEnded)
		<-f.release
		f.mu.Lock()
		f.ctxErrs = append(f.ctxErrs, ctx.Err())
		f.mu.Unlock()
		return nil, ctx.Err()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.exists[svc.UID] = true
	if f.ensures[svc.UID]++; f.ensures[svc.UID] == 1 {
		return nil, api.NewRetryError("provisioning", 100*time.Millisecond)
	}
	return &v1.LoadBalancerStatus{Ingress: []v1.LoadBalancerIngress{{IP: "192.0.2.1"}}}, nil
}

func (f *fakeLB) UpdateLoadBalancer(context.Context, string, *v1.Service, []*v1.Node) error {
	return nil
}

func (f *fakeLB) EnsureLoadBalancerDeleted(_ context.Context, _ string, svc *v1.Service) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.exists, svc.UID)
	return nil
}

func createNode(t *testing.T, cs kubernetes.Interface, name, ip string) {
	t.Helper()
	n, err := cs.CoreV1().Nodes().Create(t.Context(), &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	require.NoError(t, err)
	n.Status = v1.NodeStatus{
		Conditions: []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue, Reason: "Test"}},
		Addresses:  []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: ip}},
	}
	_, err = cs.CoreV1().Nodes().UpdateStatus(t.Context(), n, metav1.UpdateOptions{})
	require.NoError(t, err)
}

func createService(t *testing.T, cs kubernetes.Interface, name string) *v1.Service {
	t.Helper()
	svc, err := cs.CoreV1().Services("default").Create(t.Context(), &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec:       v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer, Ports: []v1.ServicePort{{Name: "http", Port: 80}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	return svc
}

// eventually polls cond until it holds, failing the test after
// stepTimeout or when the controller exited on its own.
func eventually(t *testing.T, c *Controller, cond func() bool, what string) {
	t.Helper()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	deadline := time.NewTimer(stepTimeout)
	defer deadline.Stop()
	for !cond() {
		select {
		case <-tick.C:
		case <-deadline.C:
			t.Fatalf("%s: not within %v; the controller's output:\n%s", what, stepTimeout, lastLines(c.Log(), 40))
		case <-c.Done():
			t.Fatalf("%s: %v", what, c.Err())
		}
	}
}

func start(t *testing.T, cfg *rest.Config, lb cloudprovider.LoadBalancer) *Controller {
	t.Helper()
	c, err := Start(t.Context(), Config{REST: cfg, Balancer: lb})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, c.Stop()) })
	return c
}

// The controller's calls reach the Balancer, a RetryError's delay
// crosses (one more call, no backoff), the status is published, and the
// deletion completes through GetLoadBalancer and EnsureLoadBalancerDeleted.
func TestServiceConvergesAndIsDeleted(t *testing.T) {
	a := testenv.APIServer(t)
	cs := kubernetes.NewForConfigOrDie(a.Config())
	ctx := t.Context()
	createNode(t, cs, "n1", "10.0.0.1")
	lb := newFakeLB()
	c := start(t, a.Config(), lb)

	svc := createService(t, cs, "web")
	eventually(t, c, func() bool {
		cur, err := cs.CoreV1().Services("default").Get(ctx, "web", metav1.GetOptions{})
		require.NoError(t, err)
		return len(cur.Status.LoadBalancer.Ingress) == 1 && cur.Status.LoadBalancer.Ingress[0].IP == "192.0.2.1"
	}, "status.loadBalancer.ingress")
	require.Equal(t, int64(2), c.Calls().Ensure, "a RetryError, then the status")
	// The controller's recorder writes its events from a goroutine of its
	// own, behind its client's rate limit: the status can be published
	// before the Warning of the first call is written. Other components
	// warn about the Service too (the apiserver's ClusterIP repair loop,
	// under load): only the service controller's SyncLoadBalancerFailed
	// is the RetryError's.
	var warning string
	eventually(t, c, func() bool {
		events, err := cs.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.uid=" + string(svc.UID)})
		require.NoError(t, err)
		for _, e := range events.Items {
			if e.Type == v1.EventTypeWarning && e.Reason == "SyncLoadBalancerFailed" {
				warning = e.Message
				return true
			}
		}
		return false
	}, "the RetryError's Warning event")
	require.Contains(t, warning, "provisioning", "the RetryError's message crossed")

	require.NoError(t, cs.CoreV1().Services("default").Delete(ctx, "web", metav1.DeleteOptions{}))
	eventually(t, c, func() bool {
		_, err := cs.CoreV1().Services("default").Get(ctx, "web", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}, "the Service gone (the finalizer removed)")
	require.Equal(t, int64(1), c.Calls().Delete)
	require.NoError(t, c.Stop())
	<-c.Done()
	require.NoError(t, c.Err())
	t.Logf("calls: %+v; race reports of the controller's process: %d bytes", c.Calls(), len(c.RaceReports()))
}

// Kill crashes the controller; the call it had in flight sees its context
// end, and Kill returns only once that call returned.
func TestKillEndsTheCallsInFlight(t *testing.T) {
	a := testenv.APIServer(t)
	cs := kubernetes.NewForConfigOrDie(a.Config())
	createNode(t, cs, "n1", "10.0.0.1")
	lb := newFakeLB()
	lb.block = true
	c := start(t, a.Config(), lb)
	createService(t, cs, "web")
	select {
	case <-lb.started:
	case <-time.After(stepTimeout):
		t.Fatalf("no EnsureLoadBalancer call; the controller's output:\n%s", c.Log())
	}
	killed := make(chan error, 1)
	go func() { killed <- c.Kill() }()
	select {
	case <-lb.ctxEnded:
	case <-time.After(stepTimeout):
		t.Fatal("Kill did not end the context of the call in flight")
	}
	select {
	case <-killed:
		t.Fatal("Kill returned while a call was in flight")
	default:
	}
	close(lb.release)
	require.NoError(t, <-killed)
	lb.mu.Lock()
	defer lb.mu.Unlock()
	require.Len(t, lb.ctxErrs, 1, "the call in flight returned before Kill did")
	require.ErrorIs(t, lb.ctxErrs[0], context.Canceled)
	require.NoError(t, c.Err(), "killed, not exited on its own")
}

// A controller's process that ends although nobody stopped it is
// reported: crashed when it reported nothing, stopped with the reason it
// reported otherwise.
func TestExitOnItsOwnIsReported(t *testing.T) {
	a := testenv.APIServer(t)
	for _, tc := range []struct {
		sig  syscall.Signal
		want string
	}{
		{syscall.SIGKILL, "without a report, crashed or killed (signal: killed)"},
		{syscall.SIGTERM, "it stopped (" + syscall.SIGTERM.String()},
	} {
		t.Run(tc.sig.String(), func(t *testing.T) {
			c := start(t, a.Config(), newFakeLB())
			require.NoError(t, c.cmd.Process.Signal(tc.sig)) // not through Stop or Kill
			select {
			case <-c.Done():
			case <-time.After(stepTimeout):
				t.Fatal("the signalled process's exit was not seen")
			}
			require.ErrorIs(t, c.Err(), ErrExited)
			require.ErrorContains(t, c.Err(), tc.want)
		})
	}
}

// A controller's process that cannot run reports why over its pipe, and
// Start says so rather than guessing from its exit.
func TestChildFailureIsReported(t *testing.T) {
	_, err := startWith(t.Context(), Config{REST: &rest.Config{Host: "https://127.0.0.1:1"}, Balancer: newFakeLB()},
		func(c *childConfig) { c.Kubeconfig = filepath.Join(t.TempDir(), "missing") })
	require.ErrorIs(t, err, ErrNotReady)
	require.ErrorContains(t, err, "it failed before its informers synced: reading the kubeconfig")
	require.NotContains(t, err.Error(), "ccmtest.Main", "the process reported; no guess about TestMain")
}

// A test binary whose TestMain does not call Main runs no test in the
// controller's process and exits; Start says what is missing.
func TestStartWithoutMainSaysSo(t *testing.T) {
	t.Setenv(noMainEnv, "1") // the controller's process inherits it
	_, err := Start(t.Context(), Config{REST: &rest.Config{Host: "https://127.0.0.1:1"}, Balancer: newFakeLB()})
	require.ErrorIs(t, err, ErrNotReady)
	require.ErrorContains(t, err, "ccmtest.Main")
}
