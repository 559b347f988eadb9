package ccmtest_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/reconkit/reconkit/election"
	"github.com/reconkit/reconkit/election/lease"
	"github.com/reconkit/reconkit/internal/servers"
	"github.com/reconkit/reconkit/lbrecon"
	"github.com/reconkit/reconkit/lbrecon/ccm"
	"github.com/reconkit/reconkit/lbrecon/ccm/ccmtest"
	"github.com/reconkit/reconkit/lbrecon/lbrecontest"
)

// A whole cloud-controller-manager: two replicas on one Lease, the leader
// running k8s.io/cloud-provider's service controller over an lbrecon/ccm
// Balancer that journals in ConfigMaps, on a real apiserver and a provider
// whose listing lags. A Service converges (its address published), the
// leader crashes, the other replica takes the Lease once it expires, and
// the Service is deleted: the finalizer goes and nothing is left at the
// provider.
//
// The apiserver comes from reconkit's internal/servers (the module's
// tests build it on first use, which takes minutes; later runs start it
// in seconds). Outside this module, take the *rest.Config of any
// apiserver: controller-runtime's envtest, a kind cluster. Nodes must be
// created by the test: a bare apiserver has no kubelet. The test binary's
// TestMain calls ccmtest.Main.
//
// It starts an apiserver and two controller processes and waits for a
// Lease to expire: too slow for -short, so it has no Output line and is
// run, its output checked, by TestCloudControllerManagerExample.
func Example_cloudControllerManager() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := cloudControllerManager(ctx, os.Stdout); err != nil {
		fmt.Println(err)
	}
	// It prints:
	//
	//	ccm-a leads
	//	ingress: 192.0.2.10
	//	ccm-a crashed
	//	ccm-b leads, with a newer token: true
	//	the Service is gone: its finalizer was removed
	//	objects left at the provider: 0
}

// Start refuses a Config it cannot run, before it starts anything, with an
// error a caller can branch on.
func ExampleStart_unsupportedConfig() {
	_, err := ccmtest.Start(context.Background(), ccmtest.Config{})
	fmt.Println(errors.Is(err, ccmtest.ErrUnsupportedConfig))
	// Output:
	// true
}

// TestCloudControllerManagerExample runs Example_cloudControllerManager's
// scenario and checks what it prints.
func TestCloudControllerManagerExample(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a kube-apiserver and two controller processes; skipped under -short")
	}
	var out strings.Builder
	require.NoError(t, cloudControllerManager(t.Context(), &out))
	require.Equal(t, `ccm-a leads
ingress: 192.0.2.10
ccm-a crashed
ccm-b leads, with a newer token: true
the Service is gone: its finalizer was removed
objects left at the provider: 0
`, out.String())
}

func cloudControllerManager(ctx context.Context, out io.Writer) error {
	bins, err := servers.Build(ctx, servers.BuildOptions{ControllerManager: true})
	if err != nil {
		return err
	}
	apiserver, err := servers.StartAPIServer(ctx, servers.APIServerOptions{Binaries: bins})
	if err != nil {
		return err
	}
	defer apiserver.Close()
	cfg := apiserver.Config()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	for i, name := range []string{"node-a", "node-b"} {
		if err := createNode(ctx, cs, name, fmt.Sprintf("10.0.0.%d", i+1)); err != nil {
			return err
		}
	}

	// The provider: listings lag 300 ms, creations stay pending 100 ms,
	// deletions take 200 ms, and a fence refuses a deposed term's writes.
	provider := lbrecontest.New(lbrecontest.Config{Pending: 100 * time.Millisecond, ListLag: 300 * time.Millisecond,
		DeleteDelay: 200 * time.Millisecond})
	fence := lbrecon.NewFence("provider", 0, "clear the provider's fence")
	mapping := ccm.Funcs{LoadBalancerFunc: func(_ context.Context, _ string, svc *v1.Service, nodes []*v1.Node) (lbrecon.LoadBalancer, error) {
		ports, err := ccm.ServicePorts(svc)
		if err != nil {
			return lbrecon.LoadBalancer{}, err
		}
		return lbrecon.LoadBalancer{ID: "lb-1", Suffix: string(svc.UID), Ports: ports,
			Addresses: []netip.Addr{netip.MustParseAddr("192.0.2.10")}, Targets: ccm.NodeTargets(nodes)}, nil
	}}

	// replica is one cloud-controller-manager process: a candidate on the
	// Lease and, while it leads, the service controller over a Balancer
	// that writes with its term's token.
	type replica struct {
		elector *lease.Elector
		term    election.Leadership
		ctrl    *ccmtest.Controller
	}
	campaign := func(name string) (*replica, error) {
		// Short terms, for a quick failover, yet a renewal may take seconds
		// on a loaded machine without ending the term.
		el, err := lease.New(lease.Config{Client: cs, Namespace: "kube-system", Name: "cloud-controller-manager", Identity: name,
			LeaseDuration: 8 * time.Second, RenewDeadline: 6 * time.Second, RetryPeriod: time.Second})
		if err != nil {
			return nil, err
		}
		term, err := el.Campaign(ctx)
		if err != nil {
			return nil, err
		}
		b, err := ccm.New(ccm.Config{
			Engine:  provider,
			Mapping: mapping,
			Token: func(context.Context) (uint64, error) {
				if err := term.Context().Err(); err != nil {
					return 0, context.Cause(term.Context())
				}
				return term.Token(), nil
			},
			Admit:        fence.Admit,
			Journal:      ccm.NewConfigMapJournal(cs.CoreV1(), ccm.ConfigMapJournalOptions{}),
			TeardownWait: 10 * time.Second, // one EnsureLoadBalancerDeleted call tears down
			Reconciler: lbrecon.Config{ListLag: 300 * time.Millisecond, PollInterval: 100 * time.Millisecond,
				CallTimeout: 5 * time.Second},
		})
		if err != nil {
			return nil, err
		}
		// The controller runs while the term lasts.
		ctrl, err := ccmtest.Start(term.Context(), ccmtest.Config{REST: cfg, Balancer: b})
		if err != nil {
			return nil, err
		}
		return &replica{elector: el, term: term, ctrl: ctrl}, nil
	}

	a, err := campaign("ccm-a")
	if err != nil {
		return err
	}
	fmt.Fprintln(out, "ccm-a leads")
	svcs := cs.CoreV1().Services("default")
	if _, err := svcs.Create(ctx, &v1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer, Ports: []v1.ServicePort{{Name: "http", Port: 80}}}},
		metav1.CreateOptions{}); err != nil {
		return err
	}
	var ingress string
	if err := poll(ctx, func() (bool, error) {
		svc, err := svcs.Get(ctx, "web", metav1.GetOptions{})
		if err != nil || len(svc.Status.LoadBalancer.Ingress) == 0 {
			return false, err
		}
		ingress = svc.Status.LoadBalancer.Ingress[0].IP
		return true, nil
	}); err != nil {
		return err
	}
	fmt.Fprintln(out, "ingress:", ingress)

	// ccm-a crashes: its controller is killed, and its Lease is left to
	// expire (Close releases nothing).
	if err := a.ctrl.Kill(); err != nil {
		return err
	}
	if err := a.elector.Close(); err != nil {
		return err
	}
	fmt.Fprintln(out, "ccm-a crashed")
	b, err := campaign("ccm-b")
	if err != nil {
		return err
	}
	defer func() {
		_ = b.ctrl.Stop()
		_ = b.term.Resign(context.Background())
		_ = b.elector.Close()
	}()
	fmt.Fprintln(out, "ccm-b leads, with a newer token:", b.term.Token() > a.term.Token())

	if err := svcs.Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		return err
	}
	if err := poll(ctx, func() (bool, error) {
		_, err := svcs.Get(ctx, "web", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return false, err
	}); err != nil {
		return fmt.Errorf("%w; the controller's output:\n%s", err, b.ctrl.Log())
	}
	fmt.Fprintln(out, "the Service is gone: its finalizer was removed")
	fmt.Fprintln(out, "objects left at the provider:", len(provider.Objects()))
	return nil
}

func createNode(ctx context.Context, cs kubernetes.Interface, name, ip string) error {
	n, err := cs.CoreV1().Nodes().Create(ctx, &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	n.Status = v1.NodeStatus{
		Conditions: []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue, Reason: "Ready"}},
		Addresses:  []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: ip}},
	}
	_, err = cs.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
	return err
}

// poll calls cond every 50 ms until it holds, fails, or ctx ends.
func poll(ctx context.Context, cond func() (bool, error)) error {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		ok, err := cond()
		if ok || err != nil {
			return err
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return errors.New("not within the example's deadline")
		}
	}
}
