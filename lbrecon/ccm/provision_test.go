package ccm_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cloud-provider/api"

	"github.com/reconkit/reconkit/lbrecon"
	"github.com/reconkit/reconkit/lbrecon/ccm"
	"github.com/reconkit/reconkit/lbrecon/lbrecontest"
)

// Tests of a Balancer whose plan creates each Service's load balancer
// (lbrecon.LoadBalancer.Provision) on the ELB-shaped model, which
// assigns an address and a DNS name a while after the load balancer is
// ok.

// provisionMapping gives every Service a load balancer of its own, named
// after its UID, with a listener per port (the ELB shape), and a health
// check with externalTrafficPolicy Local.
var provisionMapping = provisionMappingListening(lbrecon.ListenPorts)

// provisionMappingListening is provisionMapping listening as listen says:
// with ListenBinds, a frontend per port bound on the address the provider
// assigns (the HAProxy shape).
func provisionMappingListening(listen lbrecon.Listening) ccm.Funcs {
	return ccm.Funcs{LoadBalancerFunc: func(_ context.Context, _ string, svc *v1.Service, nodes []*v1.Node) (lbrecon.LoadBalancer, error) {
		ports, err := ccm.ServicePorts(svc)
		if err != nil {
			return lbrecon.LoadBalancer{}, err
		}
		return lbrecon.LoadBalancer{ID: "a" + string(svc.UID), Suffix: string(svc.UID), Provision: true, Listening: listen,
			Ports: ports, Targets: ccm.NodeTargets(nodes), HealthCheck: ccm.ServiceHealthCheck(svc)}, nil
	}}
}

func provService(uid string) *v1.Service {
	return &v1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: types.UID(uid)},
		Spec: v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer, ExternalTrafficPolicy: v1.ServiceExternalTrafficPolicyCluster,
			Ports: []v1.ServicePort{{Name: "http", Port: 80, NodePort: 30080, Protocol: v1.ProtocolTCP}}}}
}

func provNodes(n int) []*v1.Node {
	out := make([]*v1.Node, n)
	for i := range out {
		out[i] = &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("n%d", i+1)},
			Status: v1.NodeStatus{Addresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: fmt.Sprintf("10.0.0.%d", i+1)}}}}
	}
	return out
}

func provBalancer(t *testing.T, eng lbrecon.Engine) *ccm.Balancer {
	t.Helper()
	b, err := ccm.New(ccm.Config{Engine: eng, Mapping: provisionMapping, Journal: &ccm.MemoryJournal{},
		Token: func(context.Context) (uint64, error) { return 1, nil }})
	require.NoError(t, err)
	return b
}

// provEnsure is ensure (the service controller's calls, again after each
// RetryError's delay) for a call that must converge; it returns the
// status and the number of RetryErrors.
func provEnsure(t *testing.T, b *ccm.Balancer, svc *v1.Service, ns []*v1.Node) (*v1.LoadBalancerStatus, int) {
	t.Helper()
	st, calls, err := ensure(t, b, svc, ns)
	require.NoError(t, err)
	return st, calls - 1
}

func elbEngine() *lbrecontest.Engine {
	return lbrecontest.New(lbrecontest.ELB(lbrecontest.Config{Latency: 10 * time.Millisecond, Pending: time.Second,
		ListLag: time.Second, DeclareListLag: true, DeleteDelay: time.Second, VIPDelay: 20 * time.Second}))
}

// The Service's status carries the address and DNS name the provider
// assigned, and only once it assigned them: until then every call is a
// RetryError, though the load balancer and its children are there.
func TestProvisionPublishesTheAssignedAddressOnceKnown(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		eng := elbEngine()
		b := provBalancer(t, eng)
		svc := provService("uid-1")
		start := time.Now()
		st, retries := provEnsure(t, b, svc, provNodes(2))
		require.GreaterOrEqual(t, time.Since(start), 20*time.Second, "published before the address was assigned")
		require.Positive(t, retries)
		require.Equal(t, []v1.LoadBalancerIngress{{IP: "198.51.100.1", Hostname: "auid-1.lb.example"}}, st.Ingress)
	})
}

// Someone deletes the load balancer: the next EnsureLoadBalancer creates
// it again and publishes the new address.
func TestProvisionRecreatesAndRepublishes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		eng := elbEngine()
		b := provBalancer(t, eng)
		svc := provService("uid-1")
		provEnsure(t, b, svc, provNodes(2))
		for _, o := range eng.Objects() {
			if o.Kind == lbrecon.KindLoadBalancer {
				eng.DeleteTree(o.Key())
			}
		}
		<-time.After(2 * time.Second) // past the lag
		st, _ := provEnsure(t, b, svc, provNodes(2))
		require.Equal(t, []v1.LoadBalancerIngress{{IP: "198.51.100.2", Hostname: "auid-1.lb.example"}}, st.Ingress)
	})
}

// externalTrafficPolicy Cluster to Local: the health check on the
// Service's healthCheckNodePort is added, and nothing else changes.
func TestProvisionLocalAddsOnlyTheHealthCheck(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		eng := elbEngine()
		b := provBalancer(t, eng)
		svc := provService("uid-1")
		provEnsure(t, b, svc, provNodes(2))
		before := map[lbrecon.Key]lbrecon.Object{}
		for _, o := range eng.Objects() {
			before[o.Key()] = o
		}
		local := svc.DeepCopy()
		local.Spec.ExternalTrafficPolicy, local.Spec.HealthCheckNodePort = v1.ServiceExternalTrafficPolicyLocal, 32100
		provEnsure(t, b, local, provNodes(2))
		checks := 0
		for _, o := range eng.Objects() {
			if o.Kind == lbrecon.KindHealthCheck {
				checks++
				require.Equal(t, uint16(32100), o.Spec.(lbrecon.HealthCheckSpec).Port)
				require.Equal(t, "/healthz", o.Spec.(lbrecon.HealthCheckSpec).Path)
				continue
			}
			require.Equal(t, before[o.Key()], o)
		}
		require.Equal(t, 1, checks)
		require.Len(t, eng.Objects(), len(before)+1)
	})
}

// Deleting the Service tears the children down before the load balancer,
// and leaves nothing.
func TestProvisionDeleteTearsDownChildrenFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		eng := elbEngine()
		b := provBalancer(t, eng)
		svc := provService("uid-1")
		provEnsure(t, b, svc, provNodes(2))
		require.Len(t, eng.Objects(), 5) // load balancer, pool, listener, two members
		for calls := 0; ; calls++ {
			require.Less(t, calls, 100)
			err := b.EnsureLoadBalancerDeleted(t.Context(), "c", svc)
			var re *api.RetryError
			if !errors.As(err, &re) {
				require.NoError(t, err)
				break
			}
			lbs := 0
			for _, o := range eng.Objects() {
				if o.Kind == lbrecon.KindLoadBalancer {
					lbs++
				}
			}
			if lbs == 0 {
				require.Empty(t, eng.Objects(), "a child outlived the load balancer")
			}
			<-time.After(re.RetryAfter())
		}
		require.Empty(t, eng.Objects())
		_, exists, err := b.GetLoadBalancer(t.Context(), "c", svc)
		require.NoError(t, err)
		require.False(t, exists)
	})
}
