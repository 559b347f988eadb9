package ccm_test

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/reconkit/reconkit/internal/testenv"
	"github.com/reconkit/reconkit/lbrecon"
	"github.com/reconkit/reconkit/lbrecon/lbrecontest"
)

// The provisioned path on the HAProxy-shaped model
// (lbrecontest.HAProxy: an instance the provider allocates, with an
// assigned address; per port a frontend with a bind on that address,
// refused twice on one address and port), under the real service
// controller (ccmtest) on the real apiserver.

// haproxyHolds reports whether the provider holds exactly the HAProxy
// shape of svc on the load balancer lb: per Service port a backend, a
// frontend, a bind on lb's assigned address at the port, and a server per
// node at the port's node port; nothing else but lb.
func haproxyHolds(objs []lbrecon.Object, lb lbrecon.Object, svc *v1.Service, nodes int) error {
	st, ok := lbrecon.StatusOfObject(lb)
	if !ok || !st.Address.IsValid() {
		return fmt.Errorf("load balancer %v has no address", lb)
	}
	var binds []netip.AddrPort
	var servers []uint16
	kinds := map[string]int{}
	for _, o := range objs {
		kinds[o.Kind]++
		switch s := o.Spec.(type) {
		case lbrecon.BindSpec:
			binds = append(binds, netip.AddrPortFrom(s.Address, s.Port))
		case lbrecon.ServerSpec:
			servers = append(servers, s.Port)
		}
	}
	var wantBinds []netip.AddrPort
	var wantServers []uint16
	for _, p := range svc.Spec.Ports {
		wantBinds = append(wantBinds, netip.AddrPortFrom(st.Address, uint16(p.Port)))
		for range nodes {
			wantServers = append(wantServers, uint16(p.NodePort))
		}
	}
	for _, s := range [][]uint16{servers, wantServers} {
		slices.Sort(s)
	}
	slices.SortFunc(binds, netip.AddrPort.Compare)
	slices.SortFunc(wantBinds, netip.AddrPort.Compare)
	n := len(svc.Spec.Ports)
	want := map[string]int{lbrecon.KindLoadBalancer: 1, lbrecon.KindBackend: n, lbrecon.KindFrontend: n, lbrecon.KindBind: n, lbrecon.KindServer: n * nodes}
	switch {
	case !maps.Equal(kinds, want):
		return fmt.Errorf("objects by kind %v, want %v", kinds, want)
	case !slices.Equal(binds, wantBinds):
		return fmt.Errorf("binds on %v, want %v", binds, wantBinds)
	case !slices.Equal(servers, wantServers):
		return fmt.Errorf("servers on node ports %v, want %v", servers, wantServers)
	}
	return nil
}

// A Service on the HAProxy shape through the real controller: the
// provider's instance is created and its assigned address published, the
// frontends bound on it; a change of ports moves the binds and servers
// and keeps the instance and its address; deleting the Service takes
// everything down, children first, and then the finalizer goes.
func TestHAProxyServiceUnderTheRealController(t *testing.T) {
	a := testenv.APIServer(t)
	cs := kubernetes.NewForConfigOrDie(a.Config())
	ctx, fail := context.WithCancelCause(t.Context())
	defer fail(nil)
	ctx, cancel := context.WithTimeout(ctx, 9*time.Minute)
	defer cancel()
	svcs := cs.CoreV1().Services("default")

	eng, order, pub, ctrl := startProvisioned(t, a, cs, lbrecontest.HAProxy, provisionMappingListening(lbrecon.ListenBinds), fail)

	// eventually waits up to within for cond, failing at once on a wrong
	// publication.
	eventually := func(t *testing.T, within time.Duration, cond func() error, what string) {
		t.Helper()
		waitFor(t, ctx, eng, within, pub.violations, what, cond)
	}
	// converged waits until the provider holds the HAProxy shape of the
	// Service as the apiserver has it now, and its status is the
	// instance's assigned address; it returns the instance.
	converged := func(t *testing.T, name string) lbrecon.Object {
		t.Helper()
		var lb lbrecon.Object
		eventually(t, stepTimeout, func() error {
			var found bool
			if lb, found = provLB(eng, name); !found {
				return fmt.Errorf("no load balancer %s", name)
			}
			cur, err := svcs.Get(ctx, "web", metav1.GetOptions{})
			if err != nil {
				return err
			}
			if err := haproxyHolds(eng.Objects(), lb, cur, 2); err != nil {
				return err
			}
			if in, want := cur.Status.LoadBalancer.Ingress, provWant(lb); !sameIngress(in, want) {
				return fmt.Errorf("status.loadBalancer.ingress %v, want %v", in, want)
			}
			return nil
		}, "the provider holds the Service's HAProxy shape and its status the assigned address")
		return lb
	}
	run := stopAtFirstFailure(t)
	svc := createWeb(t, ctx, svcs)
	name := "a" + string(svc.UID)
	var first lbrecon.Object

	run("provisioned: the instance, a frontend bound on its assigned address, the address published", func(t *testing.T) {
		first = converged(t, name)
		require.Len(t, eng.Objects(), 6) // instance, backend, frontend, bind, two servers
		require.Greater(t, ctrl.Calls().Ensure, pub.ok.Load(), "no RetryError before the address was assigned")
	})

	run("ports changed: binds and servers follow, the instance and its address stay", func(t *testing.T) {
		cur, err := svcs.Get(ctx, "web", metav1.GetOptions{})
		require.NoError(t, err)
		cur.Spec.Ports[0].Port = 8081 // the bind moves to the new port
		cur.Spec.Ports = append(cur.Spec.Ports, v1.ServicePort{Name: "https", Port: 443, TargetPort: intstr.FromInt32(8443), Protocol: v1.ProtocolTCP})
		_, err = svcs.Update(ctx, cur, metav1.UpdateOptions{})
		require.NoError(t, err)
		lb := converged(t, name)
		require.Equal(t, first.ID, lb.ID, "the instance rebuilt")
		require.Equal(t, provWant(first), provWant(lb), "the address changed")
		require.Len(t, eng.Objects(), 11) // instance; per port backend, frontend, bind, two servers
	})

	run("deleted: nothing left at the provider, children first, then the finalizer goes", func(t *testing.T) {
		start := time.Now()
		require.NoError(t, svcs.Delete(ctx, "web", metav1.DeleteOptions{}))
		// The controller drops the RetryError of EnsureLoadBalancerDeleted
		// (cloud-provider v0.37.1 controllers/service/controller.go:389
		// wraps it with %v), so the deletion's passes come at its
		// exponential backoff (5 s, 10 s, 20 s, 40 s, 80 s, 160 s): a
		// teardown of the HAProxy shape's four levels took 6 calls (2m30s)
		// here; the deadline admits a seventh.
		eventually(t, 6*time.Minute, func() error {
			if _, err := svcs.Get(ctx, "web", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("the Service is still there (%v)", err)
			}
			return nil
		}, "the Service gone (its finalizer removed)")
		require.Empty(t, eng.Objects(), "nothing left at the provider once the finalizer went")
		require.Empty(t, order.violations(), "children destroyed before their load balancer")
		require.Empty(t, pub.violations())
		t.Logf("deleted in %v, %d EnsureLoadBalancerDeleted calls", time.Since(start).Round(time.Second), ctrl.Calls().Delete)
	})
	t.Logf("load-balancer calls: %+v; provider requests: %d", ctrl.Calls(), eng.Requests())
}
