package ccm_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cloud-provider/api"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/reconkit/reconkit/lbrecon"
	"github.com/reconkit/reconkit/lbrecon/ccm"
	"github.com/reconkit/reconkit/lbrecon/lbrecontest"
)

// A CCM for an ELB- or Octavia-shaped cloud: each Service gets a load
// balancer of its own, which the plan creates first; the provider assigns
// its address and DNS name a while after it is ok, and EnsureLoadBalancer
// publishes them once known. externalTrafficPolicy Local adds the health
// check on the Service's healthCheckNodePort.
func Example_provision() {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	engine := lbrecontest.New(lbrecontest.ELB(lbrecontest.Config{Clock: clk, Pending: time.Second, ListLag: time.Second,
		DeclareListLag: true, VIPDelay: 10 * time.Second})) // the provider
	balancer, err := ccm.New(ccm.Config{
		Engine: engine,
		Mapping: ccm.Funcs{LoadBalancerFunc: func(_ context.Context, _ string, svc *v1.Service, nodes []*v1.Node) (lbrecon.LoadBalancer, error) {
			ports, err := ccm.ServicePorts(svc)
			if err != nil {
				return lbrecon.LoadBalancer{}, err
			}
			return lbrecon.LoadBalancer{ID: "a" + string(svc.UID), Suffix: string(svc.UID),
				Provision: true, Listening: lbrecon.ListenPorts, HealthCheck: ccm.ServiceHealthCheck(svc),
				Ports: ports, Targets: ccm.NodeTargets(nodes)}, nil
		}},
		Token:      func(context.Context) (uint64, error) { return 1, nil },
		Journal:    &ccm.MemoryJournal{}, // a CCM uses NewConfigMapJournal
		Reconciler: lbrecon.Config{Clock: clk},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	svc := &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web", UID: "6f1c"},
		Spec: v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer, ExternalTrafficPolicy: v1.ServiceExternalTrafficPolicyLocal,
			HealthCheckNodePort: 32100, Ports: []v1.ServicePort{{Name: "http", Port: 80, NodePort: 30080}}}}
	nodes := []*v1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "node-a"},
		Status: v1.NodeStatus{Addresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: "10.0.0.1"}}}}}
	start := clk.Now()
	for {
		status, err := balancer.EnsureLoadBalancer(ctx, "cluster-1", svc, nodes)
		var retry *api.RetryError
		if errors.As(err, &retry) {
			clk.Step(retry.RetryAfter()) // the service controller's AddAfter
			continue
		}
		if err != nil {
			fmt.Println(err)
			return
		}
		in := status.Ingress[0]
		fmt.Println("ingress:", in.IP, in.Hostname, "published after the address was assigned:", clk.Since(start) >= 11*time.Second)
		break
	}
	kinds := map[string]int{}
	for _, o := range engine.Objects() {
		kinds[o.Kind]++
	}
	fmt.Println(kinds)
	// Output:
	// ingress: 198.51.100.1 a6f1c.lb.example published after the address was assigned: true
	// map[backend:1 healthcheck:1 listener:1 loadbalancer:1 server:1]
}
