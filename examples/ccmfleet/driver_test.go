package ccmfleet_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	k8stesting "k8s.io/client-go/testing"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/api"

	"github.com/reconkit/reconkit/examples/ccmfleet"
	"github.com/reconkit/reconkit/kubefake"
)

// recorder is a Balancer that records its calls and answers as told.
type recorder struct {
	mu        sync.Mutex
	calls     []string
	getErr    error
	exists    bool
	ensureErr error
	deleteErr error
}

var _ cloudprovider.LoadBalancer = (*recorder)(nil)

func (r *recorder) record(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, s)
}

func (r *recorder) Calls() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.calls)
}

func (r *recorder) GetLoadBalancer(context.Context, string, *v1.Service) (*v1.LoadBalancerStatus, bool, error) {
	r.record("get")
	return &v1.LoadBalancerStatus{}, r.exists, r.getErr
}
func (r *recorder) GetLoadBalancerName(context.Context, string, *v1.Service) string { return "lb" }
func (r *recorder) EnsureLoadBalancer(context.Context, string, *v1.Service, []*v1.Node) (*v1.LoadBalancerStatus, error) {
	r.record("ensure")
	if r.ensureErr != nil {
		return nil, r.ensureErr
	}
	return &v1.LoadBalancerStatus{Ingress: []v1.LoadBalancerIngress{{IP: "192.0.2.10"}}}, nil
}
func (r *recorder) UpdateLoadBalancer(context.Context, string, *v1.Service, []*v1.Node) error {
	r.record("update")
	return nil
}
func (r *recorder) EnsureLoadBalancerDeleted(context.Context, string, *v1.Service) error {
	r.record("delete")
	return r.deleteErr
}

func clusterIPWithFinalizer() *v1.Service {
	svc := service("web", 80)
	svc.Spec.Type, svc.Spec.Ports[0].NodePort = v1.ServiceTypeClusterIP, 0
	svc.Finalizers = []string{ccmfleet.Finalizer}
	return svc
}

func finalizers(t *testing.T, c kubernetes.Interface) []string {
	t.Helper()
	svc, err := c.CoreV1().Services(namespace).Get(t.Context(), "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return svc.Finalizers
}

// A Service that no longer wants a load balancer is asked about
// (GetLoadBalancer) before it is torn down, and keeps its finalizer until
// both succeeded, as controllers/service's syncLoadBalancerIfNeeded does.
func TestCleanupBeforeTheFinalizerGoes(t *testing.T) {
	for _, tc := range []struct {
		name       string
		lb         *recorder
		wantCalls  []string
		wantFinals bool
	}{
		{"exists", &recorder{exists: true}, []string{"get", "delete"}, false},
		{"gone", &recorder{}, []string{"get"}, false},
		{"get fails", &recorder{getErr: errors.New("no spec")}, []string{"get"}, true},
		{"delete fails", &recorder{exists: true, deleteErr: errors.New("busy")}, []string{"get", "delete"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := kubefake.NewClientset(clusterIPWithFinalizer())
			d, err := ccmfleet.New(ccmfleet.Config{Client: c, Balancer: tc.lb})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := d.Sync(t.Context()); err != nil {
				t.Fatal(err)
			}
			if got := tc.lb.Calls(); !slices.Equal(got, tc.wantCalls) {
				t.Errorf("calls %v, want %v", got, tc.wantCalls)
			}
			if got := slices.Contains(finalizers(t, c), ccmfleet.Finalizer); got != tc.wantFinals {
				t.Errorf("finalizer kept: %v, want %v", got, tc.wantFinals)
			}
		})
	}
}

// The finalizer is on the Service before EnsureLoadBalancer is called: a
// Service deleted meanwhile waits for its cleanup.
func TestFinalizerBeforeEnsure(t *testing.T) {
	c := kubefake.NewClientset(service("web", 80))
	lb := &recorder{ensureErr: errors.New("provider down")}
	var atEnsure []string
	c.PrependReactor("update", "services", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if len(lb.Calls()) == 0 {
			atEnsure = a.(k8stesting.UpdateAction).GetObject().(*v1.Service).Finalizers
		}
		return false, nil, nil
	})
	d, err := ccmfleet.New(ccmfleet.Config{Client: c, Balancer: lb})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Sync(t.Context()); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(atEnsure, ccmfleet.Finalizer) || !slices.Equal(lb.Calls(), []string{"ensure"}) {
		t.Fatalf("finalizers written before ensure: %v; calls %v", atEnsure, lb.Calls())
	}
}

// A Balancer that fails for ever is called with the controller's
// exponential backoff, 5 s doubling to 300 s: in an hour, 6 calls to
// reach 300 s (315 s) and one every 300 s after, 17 in all.
func TestFailingBalancerBacksOff(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := kubefake.NewClientset(service("web", 80))
		lb := &recorder{ensureErr: errors.New("provider down")}
		runFor(t, c, lb, time.Hour)
		if n := len(lb.Calls()); n < 15 || n > 18 {
			t.Fatalf("%d calls in an hour, want about 17", n)
		}
	})
}

// An apiserver that refuses every listing costs one listing per Resync.
func TestRefusedListingsDoNotSpin(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := kubefake.NewClientset()
		var mu sync.Mutex
		lists := 0
		c.PrependReactor("list", "services", func(k8stesting.Action) (bool, runtime.Object, error) {
			mu.Lock()
			defer mu.Unlock()
			lists++
			return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "services"}, "", errors.New("no"))
		})
		runFor(t, c, &recorder{}, 10*time.Minute)
		mu.Lock()
		defer mu.Unlock()
		if lists > 10*60/5+1 {
			t.Fatalf("%d listings in 10 minutes, want at most one per 5 s", lists)
		}
	})
}

// EnsureLoadBalancer's RetryError brings the Service back after its delay,
// not after the backoff: a second's delay, about a call a second.
func TestEnsureRetryErrorDelayIsHonoured(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := kubefake.NewClientset(service("web", 80))
		lb := &recorder{ensureErr: api.NewRetryError("provisioning", time.Second)}
		runFor(t, c, lb, time.Minute)
		if n := len(lb.Calls()); n < 55 || n > 61 {
			t.Fatalf("%d calls in a minute, want about 60", n)
		}
	})
}

// runFor runs a Driver over c and lb for d of simulated time (the caller
// is in a synctest bubble), and waits for its Run to return.
func runFor(t *testing.T, c kubernetes.Interface, lb cloudprovider.LoadBalancer, d time.Duration) {
	t.Helper()
	drv, err := ccmfleet.New(ccmfleet.Config{Client: c, Balancer: lb})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error)
	go func() { done <- drv.Run(ctx) }()
	<-time.After(d)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
