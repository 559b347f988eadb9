package ccm_test

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/reconkit/reconkit/internal/testenv"
	"github.com/reconkit/reconkit/lbrecon"
	"github.com/reconkit/reconkit/lbrecon/ccm"
	"github.com/reconkit/reconkit/lbrecon/lbrecontest"
)

// countingTransport counts the requests a client sends.
type countingTransport struct {
	next http.RoundTripper
	n    *atomic.Int64
}

func (c countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return c.next.RoundTrip(r)
}

const lbFinalizer = "service.kubernetes.io/load-balancer-cleanup"

// cleanupTimeout bounds each wait of the cleanup proof. A teardown takes
// several EnsureLoadBalancerDeleted calls, and the service controller
// retries a failed delete with its exponential backoff (5 s doubling; it
// drops the RetryError's delay on that path): on a loaded machine, where
// each call confirms less, the fifth call comes 155 s after the first.
const cleanupTimeout = 5 * time.Minute

// The real service controller and apiserver, over a Balancer with the
// ConfigMap journal: a Service changed to type ClusterIP (the apiserver
// drops its node ports) loses every object and then its finalizer; a
// mixed-protocol Service and one with allocateLoadBalancerNodePorts false,
// refused by EnsureLoadBalancer, are deleted all the same. It also
// measures what one provisioning costs: provider calls, the Balancer's
// apiserver requests and the events on the Service.
func TestServiceControllerCleanupNeedsNoSpec(t *testing.T) {
	a := testenv.APIServer(t)
	cs := kubernetes.NewForConfigOrDie(a.Config())
	var journalRequests atomic.Int64
	jcfg := rest.CopyConfig(a.Config())
	jcfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { return countingTransport{next: rt, n: &journalRequests} }
	jcs := kubernetes.NewForConfigOrDie(jcfg)
	ctx, fail := context.WithCancelCause(t.Context())
	defer fail(nil)
	ctx, cancel := context.WithTimeout(ctx, 12*time.Minute)
	defer cancel()

	eng := lbrecontest.New(lbrecontest.Config{Pending: 100 * time.Millisecond, ListLag: testLag, DeleteDelay: 200 * time.Millisecond,
		Integrity: true, UniqueBinds: true})
	createNode(t, cs, "n1", "10.0.0.1")
	createNode(t, cs, "n2", "10.0.0.2")
	proc := startController(t, a.Config(), jcs, eng, lbrecon.NewFence("provider", 0, ""), 1, fail)
	svcs := cs.CoreV1().Services("default")

	eventually := func(t *testing.T, cond func() bool, what string) {
		t.Helper()
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		deadline := time.NewTimer(cleanupTimeout)
		defer deadline.Stop()
		for !cond() {
			select {
			case <-tick.C:
			case <-deadline.C:
				t.Fatalf("%s: not within %v", what, cleanupTimeout)
			case <-ctx.Done():
				t.Fatalf("%s: %v", what, context.Cause(ctx))
			}
		}
	}
	hasFinalizer := func(name string) (present, gone bool) {
		cur, err := svcs.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, true
		}
		require.NoError(t, err)
		for _, f := range cur.Finalizers {
			if f == lbFinalizer {
				return true, false
			}
		}
		return false, false
	}

	t.Run("type LoadBalancer to ClusterIP", func(t *testing.T) {
		start := time.Now()
		svc, err := svcs.Create(ctx, &v1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
			Spec: v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer, Selector: map[string]string{"app": "web"},
				Ports: []v1.ServicePort{
					{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: v1.ProtocolTCP},
					{Name: "https", Port: 443, TargetPort: intstr.FromInt32(8443), Protocol: v1.ProtocolTCP},
				}},
		}, metav1.CreateOptions{})
		require.NoError(t, err)
		eventually(t, func() bool {
			cur, err := svcs.Get(ctx, "web", metav1.GetOptions{})
			return err == nil && len(cur.Status.LoadBalancer.Ingress) == 1
		}, "status.loadBalancer.ingress")
		events, err := cs.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.uid=" + string(svc.UID)})
		require.NoError(t, err)
		warnings, count := 0, 0
		for _, e := range events.Items {
			if e.Source.Component != "service-controller" {
				continue // the apiserver's ClusterIP repair loop warns too, under load
			}
			count += int(max(e.Count, 1))
			if e.Type == v1.EventTypeWarning {
				warnings += int(max(e.Count, 1))
			}
		}
		t.Logf("one provisioning (2 ports, 2 nodes, %v list lag): %v; provider calls %d; Balancer's apiserver requests %d; load-balancer calls %d; events %d (%d warnings)",
			testLag, time.Since(start).Round(100*time.Millisecond), eng.Requests(), journalRequests.Load(), proc.Calls().Total(), count, warnings)
		require.Equal(t, 2+2+2+2*2, len(owned(eng, string(svc.UID))))

		cur, err := svcs.Get(ctx, "web", metav1.GetOptions{})
		require.NoError(t, err)
		cur.Spec.Type = v1.ServiceTypeClusterIP
		cur.Spec.ExternalTrafficPolicy = ""
		cur, err = svcs.Update(ctx, cur, metav1.UpdateOptions{})
		require.NoError(t, err)
		for _, p := range cur.Spec.Ports {
			require.Zero(t, p.NodePort, "the apiserver dropped the node ports")
		}
		eventually(t, func() bool { return len(owned(eng, string(svc.UID))) == 0 }, "every object gone")
		eventually(t, func() bool { present, _ := hasFinalizer("web"); return !present }, "the finalizer removed")
		cms, err := cs.CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{LabelSelector: ccm.JournalServiceLabel + "=" + string(svc.UID)})
		require.NoError(t, err)
		require.Empty(t, cms.Items, "the journal emptied")
		t.Logf("EnsureLoadBalancerDeleted calls: %d", proc.Calls().Delete)
	})

	no := false
	for name, spec := range map[string]v1.ServiceSpec{
		"mixed-protocol": {Type: v1.ServiceTypeLoadBalancer, Ports: []v1.ServicePort{
			{Name: "dns-tcp", Port: 53, Protocol: v1.ProtocolTCP}, {Name: "dns-udp", Port: 53, Protocol: v1.ProtocolUDP}}},
		"no-node-ports": {Type: v1.ServiceTypeLoadBalancer, AllocateLoadBalancerNodePorts: &no, Ports: []v1.ServicePort{
			{Name: "http", Port: 80, Protocol: v1.ProtocolTCP}}},
	} {
		t.Run(name, func(t *testing.T) {
			svc, err := svcs.Create(ctx, &v1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, Spec: spec},
				metav1.CreateOptions{})
			require.NoError(t, err)
			var msg string
			eventually(t, func() bool {
				events, err := cs.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.uid=" + string(svc.UID)})
				require.NoError(t, err)
				for _, e := range events.Items {
					if e.Reason == "SyncLoadBalancerFailed" {
						msg = e.Message
						return true
					}
				}
				return false
			}, "the refusal reported as an event")
			require.Contains(t, msg, "spec.ports[")
			t.Logf("event: %s", msg)
			present, _ := hasFinalizer(name)
			require.True(t, present, "the controller adds its finalizer before EnsureLoadBalancer")
			require.NoError(t, svcs.Delete(ctx, name, metav1.DeleteOptions{}))
			eventually(t, func() bool { _, gone := hasFinalizer(name); return gone }, "the Service deleted")
			require.Empty(t, owned(eng, string(svc.UID)))
		})
	}
}
