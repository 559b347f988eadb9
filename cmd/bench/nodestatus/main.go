package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"runtime"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"
	"text/tabwriter"
	"time"

	"golang.org/x/sync/semaphore"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/reconkit/reconkit/nodestatus"
)

var (
	mode    = flag.String("mode", "requests", "requests, scale or scale-real")
	nNodes  = flag.Int("nodes", 0, "nodes (default 10 for requests, 10000 for scale)")
	minutes = flag.Int("minutes", 60, "requests: simulated steady-state minutes")
	warmup  = flag.Duration("warmup", 30*time.Second, "scale: time after all nodes are ready before measuring")
	window  = flag.Duration("window", 2*time.Minute, "scale: measurement window")

	limit      = flag.Int("limit", 32, "scale, scale-real: the controllers share Config.Limiter semaphore.NewWeighted(limit); 0 means none")
	memProfile = flag.String("memprofile", "", "scale-real: write a heap profile taken after the warm-up to this file")
)

func node(name string) *corev1.Node {
	rl := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("20"),
		corev1.ResourceMemory: resource.MustParse("100Gi"),
		corev1.ResourcePods:   resource.MustParse("110"),
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:   name,
			Labels: map[string]string{"type": "virtual-kubelet", "kubernetes.io/role": "agent", "kubernetes.io/hostname": name},
		},
		Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: "virtual-kubelet.io/provider", Value: "bench", Effect: corev1.TaintEffectNoSchedule}}},
		Status: corev1.NodeStatus{
			Capacity:    rl,
			Allocatable: rl,
			Conditions: []corev1.NodeCondition{
				{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "ProviderReady", Message: "ok"},
				{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse, Reason: "ProviderHasSufficientMemory"},
				{Type: corev1.NodeDiskPressure, Status: corev1.ConditionFalse, Reason: "ProviderHasNoDiskPressure"},
				{Type: corev1.NodePIDPressure, Status: corev1.ConditionFalse, Reason: "ProviderHasSufficientPID"},
				{Type: corev1.NodeNetworkUnavailable, Status: corev1.ConditionFalse, Reason: "RouteCreated"},
			},
			Addresses:       []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.1"}, {Type: corev1.NodeHostName, Address: name}},
			DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: 10250}},
			NodeInfo:        corev1.NodeSystemInfo{KubeletVersion: "v1.37.1-bench", OperatingSystem: "linux", Architecture: "amd64"},
		},
	}
}

func client(api *fakeAPI) kubernetes.Interface {
	// The fake server speaks JSON only; client-go would otherwise send protobuf.
	cs, err := kubernetes.NewForConfig(&rest.Config{Host: "http://fake-apiserver", Transport: api, QPS: -1, ContentConfig: rest.ContentConfig{ContentType: "application/json", AcceptContentTypes: "application/json"}})
	if err != nil {
		panic(err) // a static config: cannot fail
	}
	return cs
}

type runner interface{ Run(context.Context) error }

// --- requests -------------------------------------------------------------

type rateRow struct {
	name  string
	rates map[string]float64 // per node per minute
}

func steadyState(name string, nodes int, mk func(kubernetes.Interface, int) runner) rateRow {
	api := newFakeAPI()
	cs := client(api)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for i := range nodes {
		r := mk(cs, i)
		wg.Go(func() { _ = r.Run(ctx) })
	}
	time.Sleep(6 * time.Minute) // registration and the first status report
	before := api.snapshot()
	time.Sleep(time.Duration(*minutes) * time.Minute)
	after := api.snapshot()
	cancel()
	wg.Wait()
	row := rateRow{name: name, rates: map[string]float64{}}
	for k, v := range after {
		if d := v - before[k]; d > 0 {
			row.rates[k] = float64(d) / float64(nodes) / float64(*minutes)
		}
	}
	return row
}

func simNodes() int {
	if *nNodes == 0 {
		return 10
	}
	return *nNodes
}

func simulate() []rateRow {
	n := simNodes()
	return []rateRow{
		steadyState("nodestatus (defaults)", n, func(cs kubernetes.Interface, i int) runner {
			c, err := nodestatus.New(nodestatus.Config{Client: cs, Node: node(fmt.Sprintf("vk-%d", i))})
			if err != nil {
				panic(err)
			}
			return c
		}),
		steadyState("seed (original algorithm)", n, func(cs kubernetes.Interface, i int) runner {
			return newSeed(cs, node(fmt.Sprintf("vk-%d", i)))
		}),
	}
}

func reportRates(rows []rateRow) {
	cols := []string{"PUT leases", "PATCH nodes/status", "GET nodes", "GET leases", "POST nodes", "POST leases"}
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(w, "requests per node per minute\t")
	for _, c := range cols {
		fmt.Fprintf(w, "%s\t", c)
	}
	fmt.Fprintf(w, "total\tNode writes per 5 min\t\n")
	for _, r := range rows {
		fmt.Fprintf(w, "%s\t", r.name)
		total := 0.0
		for _, v := range r.rates {
			total += v
		}
		for _, c := range cols {
			fmt.Fprintf(w, "%.2f\t", r.rates[c])
		}
		writes := 5 * (r.rates["PATCH nodes/status"] + r.rates["PATCH nodes"] + r.rates["PUT nodes"] + r.rates["PUT nodes/status"])
		fmt.Fprintf(w, "%.2f\t%.2f\t\n", total, writes)
	}
	fmt.Fprintf(w, "kubelet (from its code, not run)\t6.00\t0.20\t0 (informer)\t0\t0\t0\t6.20\t1.00\t\n")
	w.Flush()
	fmt.Printf("\n%d nodes each, %d simulated minutes of steady state after 6 minutes of start-up.\n", simNodes(), *minutes)
}

// --- scale ----------------------------------------------------------------

// renewals records, per node, when its lease was last renewed, and the
// gaps between renewals while measuring.
type renewals struct {
	idx     map[string]int
	last    []atomic.Int64 // unix nanos of the last lease PUT
	measure atomic.Bool
	maxGap  atomic.Int64
	late    atomic.Int64 // gaps above renewInterval*(1+jitter) + slack
	puts    atomic.Int64
}

const lateAfter = 10400*time.Millisecond + 500*time.Millisecond

func newRenewals(names []string) *renewals {
	r := &renewals{idx: make(map[string]int, len(names)), last: make([]atomic.Int64, len(names))}
	for i, name := range names {
		r.idx[name] = i
	}
	return r
}

// stale counts the leases not renewed within lateAfter before t.
func (r *renewals) stale(t time.Time) int {
	n := 0
	for i := range r.last {
		if t.Sub(time.Unix(0, r.last[i].Load())) > lateAfter {
			n++
		}
	}
	return n
}

// report writes the renewal figures of a window, with the count of leases
// stale at its end.
func (r *renewals) report(w io.Writer, stale int) {
	fmt.Fprintf(w, "renewal gaps above %v\t%d\t\n", lateAfter, r.late.Load())
	fmt.Fprintf(w, "longest renewal gap\t%v\t\n", time.Duration(r.maxGap.Load()).Round(time.Millisecond))
	fmt.Fprintf(w, "leases not renewed in the last %v of the window\t%d\t\n", lateAfter, stale)
}

func (r *renewals) record(name string) {
	i, ok := r.idx[name]
	if !ok {
		return
	}
	now := time.Now().UnixNano()
	prev := r.last[i].Swap(now)
	if !r.measure.Load() || prev == 0 {
		return
	}
	r.puts.Add(1)
	gap := now - prev
	for {
		m := r.maxGap.Load()
		if gap <= m || r.maxGap.CompareAndSwap(m, gap) {
			break
		}
	}
	if time.Duration(gap) > lateAfter {
		r.late.Add(1)
	}
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func memInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse + ms.StackInuse
}

func scale() {
	n := *nNodes
	if n == 0 {
		n = 10000
	}
	api := newFakeAPI()
	names := nodeNames(n)
	rn := newRenewals(names)
	api.onLeasePut = rn.record
	cs := client(api)
	mNew := memInUse()
	ctrls := newControllers(cs, names)
	g0 := runtime.NumGoroutine()
	m0 := memInUse()

	ctx, cancel := context.WithCancel(context.Background())
	took, waitRuns := runAll(ctx, ctrls)
	fmt.Printf("%d nodes registered and ready in %v\n", n, took.Round(time.Millisecond))
	time.Sleep(*warmup)

	m1 := memInUse()
	store := api.storeBytes()
	before := api.snapshot()
	rn.measure.Store(true)
	c0, t0 := cpuTime(), time.Now()
	var gMin, gMax, gSum, gN int
	gMin = 1 << 30
	tick := time.NewTicker(time.Second)
	for time.Since(t0) < *window {
		<-tick.C
		g := runtime.NumGoroutine() - g0
		gMin, gMax, gSum, gN = min(gMin, g), max(gMax, g), gSum+g, gN+1
	}
	tick.Stop()
	c1, t1 := cpuTime(), time.Now()
	rn.measure.Store(false)
	after := api.snapshot()
	stale := rn.stale(t1) // every lease renewed within lateAfter of the window's end?
	cancel()
	waitRuns()

	el := t1.Sub(t0)
	cpu := c1 - c0
	puts := after["PUT leases"] - before["PUT leases"]
	var keys []string
	for k := range after {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintf(w, "nodes\t%d\t\n", n)
	fmt.Fprintf(w, "window\t%v (after %v warm-up), GOMAXPROCS %d\t\n", el.Round(time.Second), *warmup, runtime.GOMAXPROCS(0))
	fmt.Fprintf(w, "Config.Limiter\t%s\t\n", limiterName())
	fmt.Fprintf(w, "memory per node (heap+stacks from before New, minus the fake server's %d B/node store)\t%.1f KiB\t\n", store/n, (float64(m1)-float64(mNew)-float64(store))/float64(n)/1024)
	fmt.Fprintf(w, "  of which allocated by New\t%.1f KiB\t\n", (float64(m0)-float64(mNew))/float64(n)/1024)
	fmt.Fprintf(w, "goroutines per node (min / mean / max over 1s samples)\t%.3f / %.3f / %.3f\t\n", float64(gMin)/float64(n), float64(gSum)/float64(gN)/float64(n), float64(gMax)/float64(n))
	fmt.Fprintf(w, "CPU used (process, incl. fake server and client-go)\t%.3f cores\t\n", cpu.Seconds()/el.Seconds())
	fmt.Fprintf(w, "CPU per heartbeat (lease PUT)\t%v\t\n", (cpu / time.Duration(max(puts, 1))).Round(time.Microsecond))
	fmt.Fprintf(w, "lease renewals in window\t%d (%.2f per node per minute)\t\n", puts, float64(puts)/float64(n)/el.Minutes())
	rn.report(w, stale)
	for _, k := range keys {
		if d := after[k] - before[k]; d > 0 {
			fmt.Fprintf(w, "  %s in window\t%d\t\n", k, d)
		}
	}
	w.Flush()
}

// nodeNames names n nodes.
func nodeNames(n int) []string {
	names := make([]string, n)
	for i := range n {
		names[i] = fmt.Sprintf("vk-%05d", i)
	}
	return names
}

// newControllers builds one controller per name, all on cs and sharing one
// Limiter (unless -limit 0).
func newControllers(cs kubernetes.Interface, names []string) []*nodestatus.NodeController {
	limiter := sharedLimiter()
	ctrls := make([]*nodestatus.NodeController, len(names))
	for i, name := range names {
		c, err := nodestatus.New(nodestatus.Config{Client: cs, Node: node(name), Limiter: limiter})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		ctrls[i] = c
	}
	return ctrls
}

// runAll runs every controller on a goroutine of its own and waits until
// all are Ready; waitRuns waits for every Run to return once ctx ended.
func runAll(ctx context.Context, ctrls []*nodestatus.NodeController) (took time.Duration, waitRuns func()) {
	var wg sync.WaitGroup
	start := time.Now()
	for _, c := range ctrls {
		wg.Go(func() { _ = c.Run(ctx) })
	}
	for _, c := range ctrls {
		<-c.Ready()
	}
	return time.Since(start), wg.Wait
}

// sharedLimiter is the Config.Limiter every controller of a scale run
// shares: nil (no bound) with -limit 0.
func sharedLimiter() nodestatus.Limiter {
	if *limit <= 0 {
		return nil // an untyped nil, not a nil *semaphore.Weighted
	}
	return semaphore.NewWeighted(int64(*limit))
}

func limiterName() string {
	if *limit <= 0 {
		return "none"
	}
	return fmt.Sprintf("semaphore.NewWeighted(%d), shared", *limit)
}

func main() {
	testing.Init()
	flag.Parse()
	switch *mode {
	case "requests":
		var rows []rateRow
		match := func(pat, str string) (bool, error) { return regexp.MatchString(pat, str) }
		testing.Main(match, []testing.InternalTest{{Name: "Simulation", F: func(t *testing.T) {
			synctest.Test(t, func(*testing.T) { rows = simulate() })
			reportRates(rows)
		}}}, nil, nil)
	case "scale":
		scale()
	case "scale-real":
		scaleReal()
	default:
		fmt.Fprintln(os.Stderr, "unknown -mode", *mode)
		os.Exit(2)
	}
}
