package lbrecon_test

import (
	"context"
	"fmt"
	"net/netip"

	"github.com/reconkit/reconkit/lbrecon"
	"github.com/reconkit/reconkit/lbrecon/lbrecontest"
)

// Reconcile a load balancer with two ports, one external address and two
// targets on the in-memory engine, then read back its status.
func Example() {
	ctx := context.Background()
	eng := lbrecontest.New(lbrecontest.Config{}) // no latency, nothing pending

	r, err := lbrecon.NewLoadBalancer(lbrecon.Config{Engine: eng, Tag: "owner=svc-1"}, lbrecon.LoadBalancer{
		ID:     "lb-1",
		Suffix: "svc-1",
		Ports: []lbrecon.Port{
			{Name: "http", NodePort: 30080, ExternalPort: 80},
			{Name: "https", NodePort: 30443, ExternalPort: 443},
		},
		Addresses: []netip.Addr{netip.MustParseAddr("192.0.2.10")},
		Targets: []lbrecon.Target{
			{Name: "node-a", Address: netip.MustParseAddr("10.0.0.1")},
			{Name: "node-b", Address: netip.MustParseAddr("10.0.0.2")},
		},
	})
	if err != nil {
		fmt.Println(err)
		return
	}

	plan, err := r.Check(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("first step creates:", len(plan.Create), plan.Create[0].Kind+"s")

	if err := r.Reconcile(ctx); err != nil {
		fmt.Println(err)
		return
	}
	status, err := r.Status(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("status:", status)
	fmt.Println("objects:", len(eng.Objects()), "creates:", eng.Calls()[lbrecon.VerbCreate])

	plan, _ = r.Check(ctx)
	fmt.Println("converged:", plan.Empty())
	// Output:
	// first step creates: 2 backends
	// status: map[192.0.2.10:[80 443]]
	// objects: 10 creates: 10
	// converged: true
}
