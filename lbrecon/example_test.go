package lbrecon_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/reconkit/reconkit/lbrecon"
	"github.com/reconkit/reconkit/lbrecon/lbrecontest"
)

// Reconcile a load balancer with two ports, one external address and two
// targets on the in-memory engine, then read back its status.
func Example() {
	ctx := context.Background()
	eng := lbrecontest.New(lbrecontest.Config{}) // no latency, nothing pending

	r, err := lbrecon.NewLoadBalancer(lbrecon.Config{Engine: eng, Tag: "owner=svc-1", Journal: lbrecon.NoJournal,
		PollInterval: 10 * time.Millisecond}, lbrecon.LoadBalancer{
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

// retryError is what a cloud provider's EnsureLoadBalancer returns while
// the load balancer is being provisioned (k8s.io/cloud-provider's
// api.RetryError): the service controller calls again after the delay
// instead of treating it as a failure.
type retryError struct{ after time.Duration }

func (e *retryError) Error() string {
	return fmt.Sprintf("load balancer provisioning, retry after %v", e.after)
}

// ensureLoadBalancer has the shape of cloud-provider's EnsureLoadBalancer:
// it never waits for the provider, it reports progress and returns.
func ensureLoadBalancer(ctx context.Context, r *lbrecon.LoadBalancerReconciler, lb lbrecon.LoadBalancer) (map[netip.Addr][]uint16, error) {
	if err := r.SetLoadBalancer(lb); err != nil {
		return nil, err
	}
	res, err := r.ReconcileOnce(ctx)
	if err != nil {
		return nil, err
	}
	if !res.Converged {
		return nil, &retryError{after: res.RequeueAfter}
	}
	return r.Status(ctx)
}

// Drive the one-pass mode the way a controller's requeue loop does, on an
// engine whose objects stay pending for a second and whose listings lag by
// two, on a fake clock the loop moves. The reconciler is kept between
// calls: it remembers what it created.
func ExampleReconciler_ReconcileOnce() {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	eng := lbrecontest.New(lbrecontest.Config{Clock: clk, Pending: time.Second, ListLag: 2 * time.Second})
	lb := lbrecon.LoadBalancer{
		ID: "lb-1", Suffix: "svc-1",
		Ports:     []lbrecon.Port{{Name: "http", NodePort: 30080, ExternalPort: 80}},
		Addresses: []netip.Addr{netip.MustParseAddr("192.0.2.10")},
		Targets:   []lbrecon.Target{{Name: "node-a", Address: netip.MustParseAddr("10.0.0.1")}},
	}
	r, err := lbrecon.NewLoadBalancer(lbrecon.Config{Engine: eng, Tag: "owner=svc-1", Journal: lbrecon.NoJournal, Clock: clk}, lb)
	if err != nil {
		fmt.Println(err)
		return
	}
	for calls := 1; ; calls++ {
		status, err := ensureLoadBalancer(ctx, r, lb)
		var retry *retryError
		if errors.As(err, &retry) {
			clk.Step(retry.after) // the controller's requeue
			continue
		}
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println("status:", status)
		fmt.Println("creates:", eng.Calls()[lbrecon.VerbCreate], "for", len(eng.Objects()), "objects")
		fmt.Println("needed more than one call:", calls > 1)
		return
	}
	// Output:
	// status: map[192.0.2.10:[80]]
	// creates: 4 for 4 objects
	// needed more than one call: true
}

// The load balancer a service uses is replaced by another one (its ID
// changes): a new reconciler builds the new one, and the old reconciler
// tears the old one down, children before parents. Objects carry the same
// owner tag on both; each reconciler touches only its own load balancer.
func ExampleLoadBalancerReconciler_Teardown() {
	ctx := context.Background()
	eng := lbrecontest.New(lbrecontest.Config{Integrity: true}) // a parent in use cannot be destroyed
	lb := lbrecon.LoadBalancer{
		ID: "lb-1", Suffix: "svc-1",
		Ports:     []lbrecon.Port{{Name: "http", NodePort: 30080, ExternalPort: 80}},
		Addresses: []netip.Addr{netip.MustParseAddr("192.0.2.10")},
		Targets:   []lbrecon.Target{{Name: "node-a", Address: netip.MustParseAddr("10.0.0.1")}},
	}
	cfg := lbrecon.Config{Engine: eng, Tag: "owner=svc-1", Journal: lbrecon.NoJournal, PollInterval: 10 * time.Millisecond}
	old, err := lbrecon.NewLoadBalancer(cfg, lb)
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := old.Reconcile(ctx); err != nil {
		fmt.Println(err)
		return
	}

	lb.ID = "lb-2"
	moved, err := lbrecon.NewLoadBalancer(cfg, lb)
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := moved.Reconcile(ctx); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("objects before the teardown:", len(eng.Objects()))
	if err := old.Teardown(ctx); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("objects after:", len(eng.Objects()), "destroys:", eng.Calls()[lbrecon.VerbDestroy])
	status, err := moved.Status(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("lb-2 status:", status)
	// Output:
	// objects before the teardown: 8
	// objects after: 4 destroys: 4
	// lb-2 status: map[192.0.2.10:[80]]
}

// A host hands its leadership term's fencing token to the engine through
// the context. A Fence remembers the highest token that wrote; the guard
// refuses a write whose token is older, so a deposed leader's late
// reconciliation changes nothing, and the refusal names the fence, both
// tokens and how to clear the fence.
func ExampleCheckToken() {
	fence := lbrecon.NewFence("lb-1 writes", 0, "restart the agent")
	eng := lbrecontest.New(lbrecontest.Config{})
	fenced := lbrecon.Guard(eng, lbrecon.CheckToken(fence.Admit))
	lb := lbrecon.LoadBalancer{
		ID: "lb-1", Suffix: "svc-1",
		Ports:   []lbrecon.Port{{Name: "http", NodePort: 30080, ExternalPort: 80}},
		Targets: []lbrecon.Target{{Name: "node-a", Address: netip.MustParseAddr("10.0.0.1")}},
	}
	leader, err := lbrecon.NewLoadBalancer(lbrecon.Config{Engine: fenced, Tag: "owner=svc-1", Journal: lbrecon.NoJournal, Parallelism: 1,
		PollInterval: 10 * time.Millisecond}, lb)
	if err != nil {
		fmt.Println(err)
		return
	}
	// Term 5 reconciles; every engine call's context carries its token.
	err = leader.Reconcile(lbrecon.WithToken(context.Background(), 5))
	fmt.Println("term 5:", err, "objects:", len(eng.Objects()))

	// Term 4's holder, deposed, tries to tear the load balancer down.
	deposed, err := lbrecon.NewLoadBalancer(lbrecon.Config{Engine: fenced, Tag: "owner=svc-1", Journal: lbrecon.NoJournal, Parallelism: 1,
		PollInterval: 10 * time.Millisecond}, lb)
	if err != nil {
		fmt.Println(err)
		return
	}
	err = deposed.Teardown(lbrecon.WithToken(context.Background(), 4))
	var fe *lbrecon.FenceError
	if errors.As(err, &fe) {
		fmt.Println("term 4 refused by", fe.Fence, "holding", fe.Stored, "objects:", len(eng.Objects()))
	}
	// Output:
	// term 5: <nil> objects: 3
	// term 4 refused by lb-1 writes holding 5 objects: 3
}

// After a restart, a host that wants load balancer lb-2 tears down the
// load balancer its owner left behind under another ID (lb-1), without a
// reconciler for it: TeardownExcept finds it by the ownership tag.
func ExampleTeardownExcept() {
	ctx := context.Background()
	eng := lbrecontest.New(lbrecontest.Config{}) // no latency, no lag
	cfg := lbrecon.Config{Engine: eng, Tag: "owner=svc-1", Journal: lbrecon.NoJournal, PollInterval: 10 * time.Millisecond}
	lb := lbrecon.LoadBalancer{
		ID:        "lb-1",
		Suffix:    "svc-1",
		Ports:     []lbrecon.Port{{Name: "http", NodePort: 30080, ExternalPort: 80}},
		Addresses: []netip.Addr{netip.MustParseAddr("192.0.2.10")},
		Targets:   []lbrecon.Target{{Name: "node-a", Address: netip.MustParseAddr("10.0.0.1")}},
	}
	for _, id := range []string{"lb-1", "lb-2"} {
		lb.ID = id
		r, err := lbrecon.NewLoadBalancer(cfg, lb)
		if err == nil {
			err = r.Reconcile(ctx)
		}
		if err != nil {
			fmt.Println(err)
			return
		}
	}
	fmt.Println("objects before:", len(eng.Objects()))

	if err := lbrecon.TeardownExcept(ctx, cfg, "lb-2"); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("objects after:", len(eng.Objects()), "destroys:", eng.Calls()[lbrecon.VerbDestroy])
	r, _ := lbrecon.NewLoadBalancer(cfg, lb)
	status, _ := r.Status(ctx)
	fmt.Println("lb-2 status:", status)
	// Output:
	// objects before: 8
	// objects after: 4 destroys: 4
	// lb-2 status: map[192.0.2.10:[80]]
}

// The plan begins with the load balancer itself (Provision): on an
// ELB-shaped provider it creates the load balancer, then under the ID the
// provider gave it a backend (pool), a listener on port 80, a server
// (member) and, for externalTrafficPolicy Local, a health check; it
// converges once the provider assigned the address, which Assigned then
// reports. The same description with ListenBinds drives an HAProxy-shaped
// provider (a frontend and a bind on the assigned address instead of the
// listener).
func ExampleLoadBalancer_provision() {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	eng := lbrecontest.New(lbrecontest.ELB(lbrecontest.Config{Clock: clk, Pending: time.Second, ListLag: time.Second,
		DeclareListLag: true, VIPDelay: 5 * time.Second}))
	lb := lbrecon.LoadBalancer{
		ID: "a6f1c", Suffix: "svc-1", Provision: true, Listening: lbrecon.ListenPorts,
		Ports:       []lbrecon.Port{{Name: "http", NodePort: 30080, ExternalPort: 80}},
		Targets:     []lbrecon.Target{{Name: "node-a", Address: netip.MustParseAddr("10.0.0.1")}},
		HealthCheck: &lbrecon.HealthCheck{Port: 32000, Path: "/healthz"},
	}
	dir, err := os.MkdirTemp("", "lbrecon-example")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	journal := lbrecon.NewFileJournal(filepath.Join(dir, "svc-1.journal"))
	r, err := lbrecon.NewLoadBalancer(lbrecon.Config{Engine: eng, Tag: "owner=svc-1", Journal: journal, Clock: clk}, lb)
	if err != nil {
		fmt.Println(err)
		return
	}
	for said := false; ; {
		res, err := r.ReconcileOnce(ctx)
		if err != nil {
			fmt.Println(err)
			return
		}
		if res.Converged {
			break
		}
		if _, _, ok := r.Assigned(); !ok && !said && len(eng.Objects()) == 5 && len(res.Plan.Pending) == 1 {
			fmt.Println("every object there; waiting for the", res.Plan.Pending[0].Kind, "to get its address")
			said = true
		}
		clk.Step(res.RequeueAfter)
	}
	objs := eng.Objects()
	order := []string{lbrecon.KindLoadBalancer, lbrecon.KindBackend, lbrecon.KindListener, lbrecon.KindServer, lbrecon.KindHealthCheck}
	slices.SortFunc(objs, func(a, b lbrecon.Object) int { return slices.Index(order, a.Kind) - slices.Index(order, b.Kind) })
	for _, o := range objs {
		fmt.Printf("%s %s %+v\n", o.Kind, o.Name, o.Spec)
	}
	st, id, _ := r.Assigned()
	fmt.Println("assigned to", id+":", st.Address, st.Hostname)
	// Output:
	// every object there; waiting for the loadbalancer to get its address
	// loadbalancer lb.svc-1 {Name:a6f1c}
	// backend http.svc-1 {LoadBalancer:id-000001}
	// listener http.svc-1 {LoadBalancer:id-000001 DefaultBackend:id-000002 Port:80}
	// server node-a.http.svc-1 {Backend:id-000002 Address:10.0.0.1 Port:30080 Weight:0}
	// healthcheck http.svc-1 {Backend:id-000002 Port:32000 Path:/healthz}
	// assigned to id-000001: 198.51.100.1 a6f1c.lb.example
}
