package ccm_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/api"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/reconkit/reconkit/kubefake"
	"github.com/reconkit/reconkit/lbrecon"
	"github.com/reconkit/reconkit/lbrecon/ccm"
	"github.com/reconkit/reconkit/lbrecon/lbrecontest"
)

// A cloud-controller-manager's wiring: the provider's engine, a mapping
// from Service and nodes to a load balancer, the leader term's fencing
// token, and the journal in ConfigMaps (here on kubefake; a CCM passes its
// clientset). The loops below call the Balancer the way the service
// controller does: EnsureLoadBalancer again after a RetryError's delay;
// once the Service is changed to type ClusterIP (the apiserver drops its
// node ports), GetLoadBalancer, then EnsureLoadBalancerDeleted while the
// load balancer exists.
func Example() {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	engine := lbrecontest.New(lbrecontest.Config{Clock: clk, Pending: time.Second, ListLag: time.Second}) // the provider

	clientset := kubefake.NewClientset()
	var term uint64 = 7 // the CCM's leader term, from its election
	balancer, err := ccm.New(ccm.Config{
		Engine: engine,
		Mapping: ccm.Funcs{LoadBalancerFunc: func(_ context.Context, _ string, svc *v1.Service, nodes []*v1.Node) (lbrecon.LoadBalancer, error) {
			ports, err := ccm.ServicePorts(svc)
			if err != nil {
				return lbrecon.LoadBalancer{}, err
			}
			return lbrecon.LoadBalancer{ID: "lb-shared", Suffix: string(svc.UID), Ports: ports,
				Addresses: []netip.Addr{netip.MustParseAddr("192.0.2.10")}, Targets: ccm.NodeTargets(nodes)}, nil
		}},
		Token:      func(context.Context) (uint64, error) { return term, nil },
		Journal:    ccm.NewConfigMapJournal(clientset.CoreV1(), ccm.ConfigMapJournalOptions{}),
		Reconciler: lbrecon.Config{Clock: clk, ListLag: time.Second},
		// This example steps its fake clock only between calls: no
		// call may wait on it, not even for a confirmation.
		TeardownWait: -1,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	var lb cloudprovider.LoadBalancer = balancer // what the CCM's cloud returns from LoadBalancer()

	svc := &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web", UID: "6f1c"},
		Spec: v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer, Ports: []v1.ServicePort{{Name: "http", Port: 80, NodePort: 30080}}}}
	nodes := []*v1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "node-a"},
		Status: v1.NodeStatus{Addresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "10.0.0.1"}}}}}

	for calls := 1; ; calls++ {
		status, err := lb.EnsureLoadBalancer(ctx, "cluster-1", svc, nodes)
		var retry *api.RetryError
		if errors.As(err, &retry) {
			clk.Step(retry.RetryAfter()) // the service controller's AddAfter
			continue
		}
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println("ingress:", status.Ingress[0].IP, "after", calls, "calls")
		break
	}
	var objs []string
	for _, o := range engine.Objects() {
		objs = append(objs, fmt.Sprint(o.Kind, " ", o.Name, " ", o.Tags))
	}
	slices.Sort(objs)
	fmt.Println(strings.Join(objs, "\n"))

	svc.Spec.Type = v1.ServiceTypeClusterIP
	svc.Spec.Ports[0].NodePort = 0
	for calls := 1; ; calls++ {
		_, exists, err := lb.GetLoadBalancer(ctx, "cluster-1", svc)
		if err != nil {
			fmt.Println(err)
			return
		}
		if !exists {
			fmt.Println("deleted after", calls-1, "calls; objects left:", len(engine.Objects()))
			break
		}
		err = lb.EnsureLoadBalancerDeleted(ctx, "cluster-1", svc)
		var retry *api.RetryError
		if errors.As(err, &retry) {
			clk.Step(retry.RetryAfter()) // the service controller backs off longer
			continue
		}
		if err != nil {
			fmt.Println(err)
			return
		}
	}
	cms, err := clientset.CoreV1().ConfigMaps("shop").List(ctx, metav1.ListOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("journal ConfigMaps left:", len(cms.Items))
	// Output:
	// ingress: 192.0.2.10 after 4 calls
	// backend http.6f1c [kubernetes-service-uid=6f1c]
	// bind 192.0.2.10.http.6f1c [kubernetes-service-uid=6f1c]
	// frontend http.6f1c [kubernetes-service-uid=6f1c]
	// server node-a.http.6f1c [kubernetes-service-uid=6f1c]
	// deleted after 5 calls; objects left: 0
	// journal ConfigMaps left: 0
}
