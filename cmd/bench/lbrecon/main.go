// Command lbrecon compares lbrecon's load-balancer reconciliation with a
// re-implementation of the original algorithm it replaces (seed.go), on the
// same in-memory engine, in simulated time.
//
// Both run inside a testing/synctest bubble, where time only passes while
// every goroutine is blocked: engine latency, pending periods and backoff
// waits take no real time, and concurrent calls overlap exactly as they
// would against a real provider. That is why this program imports testing.
//
// Usage:
//
//	go run ./cmd/bench/lbrecon [-latency 20ms] [-pending 1s] [-ports 4] [-addrs 2] [-targets 50]
package main

import (
	"context"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"regexp"
	"testing"
	"testing/synctest"
	"text/tabwriter"
	"time"

	"github.com/reconkit/reconkit/lbrecon"
	"github.com/reconkit/reconkit/lbrecon/lbrecontest"
)

var (
	latency     = flag.Duration("latency", 20*time.Millisecond, "engine latency per call")
	pending     = flag.Duration("pending", time.Second, "how long a created object stays pending")
	nPorts      = flag.Int("ports", 4, "ports")
	nAddrs      = flag.Int("addrs", 2, "external addresses")
	nTargets    = flag.Int("targets", 50, "target servers")
	parallelism = flag.Int("parallel", lbrecon.DefaultParallelism, "lbrecon Config.Parallelism")
	seedSteps   = flag.Int("seed-steps", 15, "steps of the original's wait backoff")
)

const owner = "owner=svc-1"

func desc() lbrecon.LoadBalancer {
	lb := lbrecon.LoadBalancer{ID: "lb-1", Suffix: "svc-1"}
	for i := range *nPorts {
		lb.Ports = append(lb.Ports, lbrecon.Port{Name: fmt.Sprintf("p%d", i), NodePort: uint16(30000 + i), ExternalPort: uint16(80 + i)})
	}
	for i := range *nAddrs {
		lb.Addresses = append(lb.Addresses, netip.AddrFrom4([4]byte{192, 0, 2, byte(1 + i)}))
	}
	for i := range *nTargets {
		lb.Targets = append(lb.Targets, target(i))
	}
	return lb
}

func target(i int) lbrecon.Target {
	return lbrecon.Target{Name: fmt.Sprintf("node%d", i), Address: netip.AddrFrom4([4]byte{10, byte(i / 250), byte(i % 250), 1})}
}

type result struct {
	calls map[lbrecon.Verb]int
	total int
	wall  time.Duration
	err   error
}

type algorithm struct {
	name string
	run  func(ctx context.Context, eng *lbrecontest.Engine, lb lbrecon.LoadBalancer) error
}

var algorithms = []algorithm{
	{"lbrecon", func(ctx context.Context, eng *lbrecontest.Engine, lb lbrecon.LoadBalancer) error {
		r, err := lbrecon.NewLoadBalancer(lbrecon.Config{Engine: eng, Tag: owner, Parallelism: *parallelism}, lb)
		if err != nil {
			return err
		}
		return r.Reconcile(ctx)
	}},
	{"seed", func(ctx context.Context, eng *lbrecontest.Engine, lb lbrecon.LoadBalancer) error {
		r := &seedRecon{eng: eng, lb: lb, tags: []string{owner}, backoffSteps: *seedSteps}
		return r.reconcile(ctx)
	}},
}

func measure(ctx context.Context, eng *lbrecontest.Engine, lb lbrecon.LoadBalancer, a algorithm) result {
	eng.ResetCalls()
	start := time.Now()
	err := a.run(ctx, eng, lb)
	return result{calls: eng.Calls(), total: eng.TotalCalls(), wall: time.Since(start), err: err}
}

type scenario struct {
	name    string
	res     map[string]result
	minimum int // one list, one call per change, one readiness observation per creation wave
	changes int
}

func simulate() []scenario {
	ctx := context.Background()
	lb := desc()
	changed := lb
	changed.Targets = append(append([]lbrecon.Target(nil), lb.Targets[:len(lb.Targets)-1]...), target(1000))

	np, na, nt := len(lb.Ports), len(lb.Addresses), len(lb.Targets)
	empty := scenario{name: "converge from empty", res: map[string]result{}, changes: np*2 + np*na + np*nt}
	empty.minimum = 1 + empty.changes + 3 // waves: backends; frontends and servers; binds
	change := scenario{name: "replace one server", res: map[string]result{}, changes: 2 * np}
	change.minimum = 1 + change.changes + 1

	for _, a := range algorithms {
		eng := lbrecontest.New(lbrecontest.Config{Latency: *latency, Pending: *pending})
		empty.res[a.name] = measure(ctx, eng, lb, a)
		change.res[a.name] = measure(ctx, eng, changed, a)
	}
	return []scenario{empty, change}
}

func report(scenarios []scenario) {
	fmt.Printf("load balancer: %d ports x %d addresses x %d targets; engine latency %v, pending %v; lbrecon parallelism %d\n\n",
		*nPorts, *nAddrs, *nTargets, *latency, *pending, *parallelism)
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "scenario\talgorithm\tlist\tget\tcreate\ttag\tdestroy\tcalls\tminimum\tcalls/min\twall (simulated)\terror\t")
	for _, s := range scenarios {
		for _, a := range algorithms {
			r := s.res[a.name]
			errText := "-"
			if r.err != nil {
				errText = r.err.Error()
			}
			fmt.Fprintf(w, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%.2f\t%v\t%s\t\n", s.name, a.name,
				r.calls[lbrecon.VerbList], r.calls[lbrecon.VerbGet], r.calls[lbrecon.VerbCreate], r.calls[lbrecon.VerbTag],
				r.calls[lbrecon.VerbDestroy], r.total, s.minimum, float64(r.total)/float64(s.minimum), r.wall.Round(time.Millisecond), errText)
		}
	}
	w.Flush()
	fmt.Println()
	w = tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "scenario\tseed/lbrecon calls\tlbrecon/seed wall\tgoals: calls/min <= 1.2, seed/lbrecon calls >= 3, wall <= 0.20\t")
	for _, s := range scenarios {
		o, d := s.res["lbrecon"], s.res["seed"]
		callRatio := float64(d.total) / float64(o.total)
		wallRatio := float64(o.wall) / float64(d.wall)
		ok := float64(o.total)/float64(s.minimum) <= 1.2 && callRatio >= 3 && wallRatio <= 0.2 && o.err == nil
		verdict := "met"
		if !ok {
			verdict = "NOT met"
		}
		fmt.Fprintf(w, "%s\t%.1fx\t%.3f\t%s\t\n", s.name, callRatio, wallRatio, verdict)
	}
	w.Flush()
	fmt.Println("\nminimum = 1 list + 1 call per object created or destroyed + 1 observation per creation wave to see the new objects ready")
}

func main() {
	testing.Init()
	flag.Parse()
	var scenarios []scenario
	match := func(pat, str string) (bool, error) { return regexp.MatchString(pat, str) }
	testing.Main(match, []testing.InternalTest{{Name: "Simulation", F: func(t *testing.T) {
		synctest.Test(t, func(*testing.T) { scenarios = simulate() })
		report(scenarios)
	}}}, nil, nil)
}
