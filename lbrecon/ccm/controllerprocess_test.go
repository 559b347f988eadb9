package ccm_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/reconkit/reconkit/lbrecon"
	"github.com/reconkit/reconkit/lbrecon/ccm"
	"github.com/reconkit/reconkit/lbrecon/ccm/internal/lbwire"
)

// The service controller runs in a process of its own: k8s.io/cloud-provider
// v0.37.1's controller writes its cached Service (controller.go:339) outside
// the lock its node sync reads it under (controller.go:503), which -race
// reports, and a report in the test process would fail the test. The child
// is built with -race all the same, so that it shares the test build's
// compiled dependencies (without it, a cold build cache compiled the
// Kubernetes client a second time), and its race reports go to a file of
// their own (GORACE log_path), never to the test. Its load balancer
// forwards every call over lbwire to a Balancer in the test process, which
// -race covers, as it covers the checks.

// writeKubeconfig writes a kubeconfig with cfg's server and bearer token.
func writeKubeconfig(t *testing.T, cfg *rest.Config) string {
	t.Helper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["test"] = &clientcmdapi.Cluster{Server: cfg.Host, InsecureSkipTLSVerify: true}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{Token: cfg.BearerToken}
	kc.Contexts["test"] = &clientcmdapi.Context{Cluster: "test", AuthInfo: "admin"}
	kc.CurrentContext = "test"
	path := filepath.Join(t.TempDir(), "kubeconfig")
	require.NoError(t, clientcmd.WriteToFile(*kc, path))
	return path
}

// tracked is a Balancer that counts its calls and those in flight, so a
// test can wait for a killed controller's last calls to return.
type tracked struct {
	lb      cloudprovider.LoadBalancer
	calls   atomic.Int64
	deletes atomic.Int64 // EnsureLoadBalancerDeleted calls

	mu       sync.Mutex
	inFlight int
	idle     chan struct{} // closed when inFlight drops to 0
}

var _ cloudprovider.LoadBalancer = (*tracked)(nil)

// wait returns once no call is in flight, and fails tb if calls are
// still in flight after d.
func (t *tracked) wait(tb testing.TB, d time.Duration) {
	tb.Helper()
	t.mu.Lock()
	if t.inFlight == 0 {
		t.mu.Unlock()
		return
	}
	if t.idle == nil {
		t.idle = make(chan struct{})
	}
	idle := t.idle
	t.mu.Unlock()
	recv(tb, idle, d, "the killed controller's calls in flight")
}

// recv returns the next value of ch (or its zero value once ch is
// closed), and fails tb if none comes within d.
func recv[T any](tb testing.TB, ch <-chan T, d time.Duration, what string) T {
	tb.Helper()
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case v := <-ch:
		return v
	case <-timer.C:
		tb.Fatalf("%s: nothing within %v", what, d)
		var zero T
		return zero
	}
}

func (t *tracked) enter() func() {
	t.calls.Add(1)
	t.mu.Lock()
	defer t.mu.Unlock()
	t.inFlight++
	return func() {
		t.mu.Lock()
		defer t.mu.Unlock()
		t.inFlight--
		if t.inFlight == 0 && t.idle != nil {
			close(t.idle)
			t.idle = nil
		}
	}
}

func (t *tracked) GetLoadBalancer(ctx context.Context, cluster string, svc *v1.Service) (*v1.LoadBalancerStatus, bool, error) {
	defer t.enter()()
	return t.lb.GetLoadBalancer(ctx, cluster, svc)
}

func (t *tracked) GetLoadBalancerName(ctx context.Context, cluster string, svc *v1.Service) string {
	return t.lb.GetLoadBalancerName(ctx, cluster, svc)
}

func (t *tracked) EnsureLoadBalancer(ctx context.Context, cluster string, svc *v1.Service, nodes []*v1.Node) (*v1.LoadBalancerStatus, error) {
	defer t.enter()()
	return t.lb.EnsureLoadBalancer(ctx, cluster, svc, nodes)
}

func (t *tracked) UpdateLoadBalancer(ctx context.Context, cluster string, svc *v1.Service, nodes []*v1.Node) error {
	defer t.enter()()
	return t.lb.UpdateLoadBalancer(ctx, cluster, svc, nodes)
}

func (t *tracked) EnsureLoadBalancerDeleted(ctx context.Context, cluster string, svc *v1.Service) error {
	t.deletes.Add(1)
	defer t.enter()()
	return t.lb.EnsureLoadBalancerDeleted(ctx, cluster, svc)
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if over := len(b.buf) - b.max; over > 0 {
		b.buf = append(b.buf[:0], b.buf[over:]...)
	}
	return len(p), nil
}

func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}

// controllerProcess is one cloud-controller-manager: the service
// controller in a child process, and a Balancer with a fresh reconciler
// map in this one, serving its load-balancer calls.
type controllerProcess struct {
	lb     *tracked
	srv    *http.Server
	served chan struct{}
	cmd    *exec.Cmd
	exited chan struct{} // closed once cmd.Wait returned
	log    *tailBuffer

	killed   atomic.Bool
	killOnce sync.Once
}

// startController starts a controller process for term on the apiserver of
// kubeconfig. The test's context is cancelled (with the process's log as
// the cause) if the process exits before it is killed.
func startController(t *testing.T, bin, kubeconfig string, cs kubernetes.Interface, engine lbrecon.Engine, fence *lbrecon.Fence,
	term uint64, fail context.CancelCauseFunc) *controllerProcess {
	t.Helper()
	b, err := ccm.New(ccm.Config{
		Engine:  engine,
		Mapping: testMapping,
		Token:   func(context.Context) (uint64, error) { return term, nil },
		Admit:   fence.Admit,
		Journal: ccm.NewConfigMapJournal(cs.CoreV1(), ccm.ConfigMapJournalOptions{}),
		Reconciler: lbrecon.Config{PollInterval: 50 * time.Millisecond, MaxPollInterval: 500 * time.Millisecond,
			ListLag: testLag, CallTimeout: 5 * time.Second},
	})
	require.NoError(t, err)
	p := &controllerProcess{lb: &tracked{lb: b}, served: make(chan struct{}), exited: make(chan struct{}),
		log: &tailBuffer{max: 64 << 10}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	p.srv = &http.Server{Handler: lbwire.Handler(p.lb), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		defer close(p.served)
		_ = p.srv.Serve(ln) // ErrServerClosed once killed
	}()

	p.cmd = exec.Command(bin, "-kubeconfig", kubeconfig, "-url", "http://"+ln.Addr().String(), "-cluster", "test-cluster", "-workers", "2")
	p.cmd.Stdout, p.cmd.Stderr = p.log, p.log
	p.cmd.Env = append(os.Environ(), "GORACE=log_path="+filepath.Join(t.TempDir(), "upstream-race"))
	_, err = p.cmd.StdinPipe() // the child exits when it ends: when this process dies
	require.NoError(t, err)
	if err := p.cmd.Start(); err != nil {
		p.srv.Close()
		recv(t, p.served, time.Minute, "the closed server's Serve")
		t.Fatalf("starting the service controller: %v", err)
	}
	go func() {
		err := p.cmd.Wait()
		close(p.exited)
		if !p.killed.Load() {
			fail(fmt.Errorf("the service controller of term %d exited on its own (%v); its log:\n%s", term, err, p.log.String()))
		}
	}()
	t.Cleanup(func() {
		p.kill(t)
		if t.Failed() {
			t.Logf("service controller of term %d, its log's tail:\n%s", term, lastLines(p.log.String(), 60))
		}
	})
	return p
}

// kill crashes the controller process (SIGKILL), then closes its server,
// which ends the contexts of the calls it had in flight, and waits for
// them to return: what a crashed cloud-controller-manager leaves is what
// its calls had sent.
func (p *controllerProcess) kill(t testing.TB) {
	t.Helper()
	p.killOnce.Do(func() {
		p.killed.Store(true)
		_ = p.cmd.Process.Kill()
		recv(t, p.exited, time.Minute, "the killed controller's exit")
		p.srv.Close()
		recv(t, p.served, time.Minute, "the closed server's Serve")
		p.lb.wait(t, 2*time.Minute)
	})
}

func lastLines(s string, n int) string {
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == '\n' {
			if n--; n < 0 {
				return s[i+1:]
			}
		}
	}
	return s
}
