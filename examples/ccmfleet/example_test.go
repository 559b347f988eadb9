package ccmfleet_test

import (
	"context"
	"fmt"
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/reconkit/reconkit/examples/ccmfleet"
	"github.com/reconkit/reconkit/kubefake"
	"github.com/reconkit/reconkit/lbrecon"
	"github.com/reconkit/reconkit/lbrecon/ccm"
	"github.com/reconkit/reconkit/lbrecon/lbrecontest"
)

// The driver provisions a Service's load balancer through an lbrecon/ccm
// Balancer, publishes its address, and, once the Service turns ClusterIP,
// tears it down and then removes the cleanup finalizer, all on a fake
// clock.
func Example() {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	client := kubefake.NewClientset(service("web", 80), node("node-a", "10.0.1.1"))
	engine := lbrecontest.New(lbrecontest.Config{Clock: clk, Pending: time.Second, ListLag: 2 * time.Second})
	b, err := ccm.New(ccm.Config{Engine: engine,
		Mapping: ccm.Funcs{LoadBalancerFunc: func(_ context.Context, _ string, svc *v1.Service, nodes []*v1.Node) (lbrecon.LoadBalancer, error) {
			return loadBalancer(svc, nodes)
		}},
		Token:   func(context.Context) (uint64, error) { return 1, nil }, // one replica, one term
		Journal: ccm.NewConfigMapJournal(client.CoreV1(), ccm.ConfigMapJournalOptions{}),
		// The clock is stepped between syncs only: a delete must not
		// wait on it within the call (see ccm.Config.TeardownWait).
		TeardownWait: -1,
		Reconciler:   lbrecon.Config{Clock: clk, ListLag: 2 * time.Second}})
	if err != nil {
		fmt.Println(err)
		return
	}
	d, err := ccmfleet.New(ccmfleet.Config{Client: client, Balancer: b, Clock: clk})
	if err != nil {
		fmt.Println(err)
		return
	}
	services := client.CoreV1().Services(namespace)
	// until syncs, stepping the clock by each wait, until cond holds.
	until := func(cond func(*v1.Service) bool) *v1.Service {
		for range 100 {
			wait, err := d.Sync(ctx)
			if err != nil {
				fmt.Println(err)
				return nil
			}
			if svc, err := services.Get(ctx, "web", metav1.GetOptions{}); err == nil && cond(svc) {
				return svc
			}
			clk.Step(wait)
		}
		fmt.Println("not within 100 syncs")
		return nil
	}

	svc := until(func(s *v1.Service) bool { return len(s.Status.LoadBalancer.Ingress) > 0 })
	fmt.Println("ingress:", svc.Status.LoadBalancer.Ingress[0].IP, "finalizer:", slices.Contains(svc.Finalizers, ccmfleet.Finalizer),
		"objects:", len(engine.Objects()))

	svc.Spec.Type, svc.Spec.Ports[0].NodePort = v1.ServiceTypeClusterIP, 0
	if _, err := services.Update(ctx, svc, metav1.UpdateOptions{}); err != nil {
		fmt.Println(err)
		return
	}
	svc = until(func(s *v1.Service) bool { return !slices.Contains(s.Finalizers, ccmfleet.Finalizer) })
	fmt.Println("ClusterIP: ingress:", len(svc.Status.LoadBalancer.Ingress), "objects:", len(engine.Objects()))
	// Output:
	// ingress: 192.0.2.10 finalizer: true objects: 4
	// ClusterIP: ingress: 0 objects: 0
}
