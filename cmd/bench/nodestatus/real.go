package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path"
	"runtime"
	"runtime/pprof"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/reconkit/reconkit/internal/servers"
)

// requestCounter counts a client's requests by "VERB resource".
type requestCounter struct{ m sync.Map }

type countingTransport struct {
	c  *requestCounter
	rn *renewals // sees every successful lease update
	rt http.RoundTripper
}

func (t countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	res := "other"
	switch p := req.URL.Path; {
	case strings.Contains(p, "/leases"):
		res = "leases"
	case strings.Contains(p, "/nodes") && strings.HasSuffix(p, "/status"):
		res = "nodes/status"
	case strings.Contains(p, "/nodes"):
		res = "nodes"
	}
	v, _ := t.c.m.LoadOrStore(req.Method+" "+res, new(atomic.Int64))
	v.(*atomic.Int64).Add(1)
	resp, err := t.rt.RoundTrip(req)
	if err == nil && res == "leases" && req.Method == http.MethodPut && resp.StatusCode == http.StatusOK {
		t.rn.record(path.Base(req.URL.Path))
	}
	return resp, err
}

func (c *requestCounter) snapshot() map[string]int64 {
	out := map[string]int64{}
	c.m.Range(func(k, v any) bool {
		out[k.(string)] = v.(*atomic.Int64).Load()
		return true
	})
	return out
}

// scaleReal runs n NodeControllers sharing one client-go client (protobuf,
// no client-side rate limit) against a real kube-apiserver and etcd started
// for the run, and reports memory per node in this process, requests per
// node per minute, and the apiserver's and etcd's CPU and memory.
func scaleReal() {
	n := *nNodes
	if n == 0 {
		n = 1000
	}
	if *memProfile != "" {
		runtime.MemProfileRate = 256 // precise per-node figures, at a CPU cost
	}
	ctx := context.Background()
	logf := func(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }
	bins, err := servers.Build(ctx, servers.BuildOptions{Logf: logf})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	a, err := servers.StartAPIServer(ctx, servers.APIServerOptions{Binaries: bins})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer a.Close()
	cfg := a.Config()
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	cfg.QPS = -1
	counter := &requestCounter{}
	names := nodeNames(n)
	rn := newRenewals(names)
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { return countingTransport{c: counter, rn: rn, rt: rt} }
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	for {
		if _, err := cs.CoreV1().Namespaces().Get(ctx, "kube-node-lease", metav1.GetOptions{}); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}

	mNew := memInUse()
	hNew, sNew := memSplit()
	ctrls := newControllers(cs, names)
	m0 := memInUse()
	rctx, cancel := context.WithCancel(ctx)
	took, waitRuns := runAll(rctx, ctrls)
	fmt.Printf("%d nodes registered and ready on the real apiserver in %v\n", n, took.Round(time.Millisecond))
	time.Sleep(*warmup)

	m1 := memInUse()
	h1, s1 := memSplit()
	if *memProfile != "" {
		if f, err := os.Create(*memProfile); err == nil {
			_ = pprof.WriteHeapProfile(f)
			f.Close()
		}
	}
	as0, _ := a.Stat()
	es0, _ := a.Etcd.Members[0].Stat()
	before := counter.snapshot()
	rn.measure.Store(true)
	c0, t0 := cpuTime(), time.Now()
	time.Sleep(*window)
	c1, t1 := cpuTime(), time.Now()
	rn.measure.Store(false)
	stale := rn.stale(t1)
	after := counter.snapshot()
	as1, _ := a.Stat()
	es1, _ := a.Etcd.Members[0].Stat()
	cancel()
	waitRuns()

	el := t1.Sub(t0)
	var keys []string
	var total int64
	for k := range after {
		keys = append(keys, k)
		total += after[k] - before[k]
	}
	sort.Strings(keys)
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintf(w, "nodes (real kube-apiserver v1.37.1, one client, protobuf)\t%d\t\n", n)
	fmt.Fprintf(w, "window\t%v (after %v warm-up)\t\n", el.Round(time.Second), *warmup)
	fmt.Fprintf(w, "Config.Limiter\t%s\t\n", limiterName())
	perNode := func(a, b uint64) float64 { return (float64(b) - float64(a)) / float64(n) / 1024 }
	fmt.Fprintf(w, "memory per node in this process (heap+stacks, incl. New and client-go)\t%.1f KiB\t\n", perNode(mNew, m1))
	fmt.Fprintf(w, "  heap / goroutine stacks per node\t%.1f KiB / %.1f KiB\t\n", perNode(hNew, h1), perNode(sNew, s1))
	fmt.Fprintf(w, "  of which allocated by New / after Run started\t%.1f KiB / %.1f KiB\t\n", perNode(mNew, m0), perNode(m0, m1))
	fmt.Fprintf(w, "CPU of this process\t%.3f cores\t\n", (c1-c0).Seconds()/el.Seconds())
	fmt.Fprintf(w, "kube-apiserver CPU / RSS\t%.3f cores / %.0f MiB (%.1f KiB per node)\t\n", (as1.CPU-as0.CPU).Seconds()/el.Seconds(), float64(as1.RSS)/(1<<20), float64(as1.RSS)/float64(n)/1024)
	fmt.Fprintf(w, "etcd CPU / RSS\t%.3f cores / %.0f MiB\t\n", (es1.CPU-es0.CPU).Seconds()/el.Seconds(), float64(es1.RSS)/(1<<20))
	fmt.Fprintf(w, "requests per node per minute\t%.2f\t\n", float64(total)/float64(n)/el.Minutes())
	for _, k := range keys {
		if d := after[k] - before[k]; d > 0 {
			fmt.Fprintf(w, "  %s\t%.2f\t\n", k, float64(d)/float64(n)/el.Minutes())
		}
	}
	rn.report(w, stale)
	w.Flush()
}

// memSplit returns the heap and goroutine stacks in use, after a GC.
func memSplit() (heap, stacks uint64) {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse, ms.StackInuse
}
