package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"k8s.io/klog/v2"

	"github.com/reconkit/reconkit/cmd/bench/internal/benchutil"
	"github.com/reconkit/reconkit/internal/servers"
	"github.com/reconkit/reconkit/versiongate"
	"github.com/reconkit/reconkit/versiongate/versiongatetest"
)

var (
	nodes     = flag.Int("nodes", 50, "gates in the steady-state run")
	window    = flag.Duration("window", time.Minute, "steady-state window over which requests are counted")
	watchers  = flag.Int("watchers", 50, "nodes watching the status while it is written")
	rounds    = flag.Int("rounds", 20, "status writes timed")
	big       = flag.Int("big", 1000, "gates in the large run")
	bigWindow = flag.Duration("big-window", time.Minute, "window over which the servers' CPU is measured in the large run")
	ttl       = flag.Duration("ttl", versiongate.DefaultRecordTTL, "RecordTTL of every gate")
	only      = flag.String("only", "", "run one backend only: kube, nodelease or etcd")
	skipBig   = flag.Bool("skip-big", false, "skip the large run")
	startRate = flag.Float64("start-rate", 50, "gates started per second (0: all at once)")
	readyIn   = flag.Duration("ready-timeout", 2*time.Minute, "how long a fleet may take to be ready everywhere")
	verbose   = flag.Int("v", 0, "log the gates' messages at this verbosity to stderr (1: failed renewals)")
)

func main() {
	flag.Parse()
	klog.SetLogger(logr.Discard())
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "versiongate bench:", err)
		os.Exit(1)
	}
}

// backend is one store on its server.
type backend interface {
	// name is the column heading.
	name() string
	// store returns a store for the node with the given index. Stores
	// share a few clients; each call is one node's view.
	store(i int) (versiongate.Store, error)
	// wire returns the requests sent on the wire so far.
	wire() int64
	// received returns the bytes the clients received so far: response
	// bodies and watch streams (Kubernetes), gRPC messages (etcd).
	received() int64
	// stat returns the servers' resource use so far.
	stat() (servers.ProcStat, error)
	// reset starts a fresh gate: a new keyspace or namespace.
	reset(ctx context.Context) error
}

// result is one backend's figures.
type result struct {
	wirePerNodeMin, callsPerNodeMin float64
	rxPerNodeMin                    float64
	told                            []time.Duration
	big                             bigResult
	bigErr                          error
	err                             error
}

func run() error {
	// An interrupt ends the run through the deferred closes, which stop
	// the servers and remove their state.
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	logf := func(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }
	bins, err := servers.Build(ctx, servers.BuildOptions{Logf: logf})
	if err != nil {
		return err
	}
	a, err := servers.StartAPIServer(ctx, servers.APIServerOptions{Binaries: bins})
	if err != nil {
		return err
	}
	defer a.Close()

	var backends []backend
	if *only == "" || *only == "kube" {
		k, err := newKubeBackend(ctx, a)
		if err != nil {
			return err
		}
		backends = append(backends, k)
	}
	var alone *nodeLeaseBackend
	if *only == "" || *only == "nodelease" {
		k, err := newNodeLeaseBackend(ctx, a, true)
		if err != nil {
			return err
		}
		defer k.stop()
		backends = append(backends, k)
		if alone, err = newNodeLeaseBackend(ctx, a, false); err != nil {
			return err
		}
	}
	if *only == "" || *only == "etcd" {
		e, err := newEtcdBackend(a)
		if err != nil {
			return err
		}
		defer e.close()
		backends = append(backends, e)
	}
	if len(backends) == 0 {
		return fmt.Errorf("-only %q: want kube, nodelease or etcd", *only)
	}
	var aloneWire float64
	if alone != nil {
		logf("nodestatus alone: %d nodes over %v ...", *nodes, *window)
		if aloneWire, err = nodestatusAlone(ctx, alone, *nodes, *window); err != nil {
			return fmt.Errorf("nodestatus alone: %w", err)
		}
	}

	start := time.Now()
	results := make([]result, len(backends))
	// The backends run one after the other: side by side they would share
	// the machine's cores and each would measure the other's load.
	for i, b := range backends {
		r := &results[i]
		logf("%s: steady state of %d gates over %v ...", b.name(), *nodes, *window)
		if r.wirePerNodeMin, r.callsPerNodeMin, r.rxPerNodeMin, r.err = steady(ctx, b, *nodes, *window); r.err != nil {
			return fmt.Errorf("%s: steady state: %w", b.name(), r.err)
		}
		logf("%s: %d status writes to %d watchers ...", b.name(), *rounds, *watchers)
		if r.told, r.err = tell(ctx, b, *watchers, *rounds); r.err != nil {
			return fmt.Errorf("%s: telling nodes: %w", b.name(), r.err)
		}
		if *skipBig {
			continue
		}
		logf("%s: %d gates over %v ...", b.name(), *big, *bigWindow)
		// A large gate the machine cannot carry is a result, not the end
		// of the run: its cells say so and the other columns still come.
		if r.big, r.bigErr = large(ctx, b, *big, *bigWindow); r.bigErr != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			logf("%s: %d gates failed: %v", b.name(), *big, r.bigErr)
		}
	}

	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(w, "\t")
	for _, b := range backends {
		fmt.Fprintf(w, "%s\t", b.name())
	}
	if len(backends) == 2 {
		fmt.Fprintf(w, "%s / %s\t", backends[0].name(), backends[1].name())
	}
	fmt.Fprintf(w, "\n")
	row := func(label string, v func(r result) float64, format string) {
		fmt.Fprintf(w, "%s\t", label)
		for _, r := range results {
			fmt.Fprintf(w, format+"\t", v(r))
		}
		if len(results) == 2 {
			fmt.Fprintf(w, "%s\t", benchutil.Ratio(v(results[0]), v(results[1])))
		}
		fmt.Fprintf(w, "\n")
	}
	row(fmt.Sprintf("steady: wire requests per node per minute (%d nodes, TTL %v)", *nodes, *ttl), func(r result) float64 { return r.wirePerNodeMin }, "%.2f")
	row("steady: store calls per node per minute", func(r result) float64 { return r.callsPerNodeMin }, "%.2f")
	row("steady: KiB received per node per minute", func(r result) float64 { return r.rxPerNodeMin / 1024 }, "%.1f")
	row(fmt.Sprintf("status write → all %d watchers told, p50 (ms, n=%d)", *watchers, *rounds), func(r result) float64 { return benchutil.Ms(benchutil.Pct(r.told, 50)) }, "%.1f")
	row("status write → all watchers told, max (ms)", func(r result) float64 { return benchutil.Ms(benchutil.Pct(r.told, 100)) }, "%.1f")
	if !*skipBig {
		bigRow := func(label string, v func(r bigResult) float64, format string) {
			fmt.Fprintf(w, "%d gates: %s\t", *big, label)
			failed := false
			for _, r := range results {
				if r.bigErr != nil {
					failed = true
					fmt.Fprintf(w, "failed\t")
					continue
				}
				fmt.Fprintf(w, format+"\t", v(r.big))
			}
			if len(results) == 2 {
				if failed {
					fmt.Fprintf(w, "-\t")
				} else {
					fmt.Fprintf(w, "%s\t", benchutil.Ratio(v(results[0].big), v(results[1].big)))
				}
			}
			fmt.Fprintf(w, "\n")
		}
		bigRow("start until all ready (s)", func(r bigResult) float64 { return r.startup.Seconds() }, "%.1f")
		bigRow("server CPU (ms per s)", func(r bigResult) float64 { return r.serverCPU * 1000 }, "%.0f")
		bigRow("server RSS (MiB)", func(r bigResult) float64 { return float64(r.serverRSS) / (1 << 20) }, "%.0f")
		bigRow("client process CPU (ms per s)", func(r bigResult) float64 { return r.clientCPU * 1000 }, "%.0f")
		bigRow("client process RSS (MiB)", func(r bigResult) float64 { return float64(r.clientRSS) / (1 << 20) }, "%.0f")
		bigRow("KiB received per node per minute", func(r bigResult) float64 { return r.rxPerNodeMin / 1024 }, "%.1f")
		bigRow("renewal latency p99 (ms)", func(r bigResult) float64 { return benchutil.Ms(r.keepAliveP99) }, "%.1f")
	}
	w.Flush()
	for i, r := range results {
		if r.bigErr != nil {
			fmt.Printf("%s, %d gates: %v\n", backends[i].name(), *big, r.bigErr)
		}
	}
	if alone != nil {
		fmt.Printf("nodestatus alone: %.2f wire requests per node per minute (%d nodes); the node-Lease gate's extra is its column less this\n", aloneWire, *nodes)
	}
	logf("total %v", time.Since(start).Round(time.Second))
	return nil
}

// fleet is a set of running gates: node 0 leads (its candidate wins at
// once, with token 1), the others never campaign.
type fleet struct {
	calls atomic.Int64
	lost  atomic.Int64 // records lost (EventRecordLost)
	// keepAlives are the latencies of the acknowledged record renewals.
	mu         sync.Mutex
	keepAlives []time.Duration
	cancel     context.CancelFunc
	wg         sync.WaitGroup
	gates      []*versiongate.Gate
	errs       chan error
}

func startFleet(ctx context.Context, b backend, n int) (*fleet, error) {
	if err := b.reset(ctx); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	f := &fleet{cancel: cancel, errs: make(chan error, n)}
	if *verbose > 0 {
		ctx = logr.NewContext(ctx, funcr.New(func(prefix, args string) { fmt.Fprintln(os.Stderr, prefix, args) }, funcr.Options{Verbosity: *verbose}))
	}
	v := versiongate.Version{Release: versiongate.Release{Major: 1, Minor: 4}}
	begun := time.Now()
	for i := range n {
		// A server too loaded to let gates start is a failure like one
		// too loaded to let them get ready.
		if d := time.Since(begun); d > *readyIn {
			f.stop()
			return nil, fmt.Errorf("only %d of %d gates started in %v (-ready-timeout)", i, n, d.Round(time.Second))
		}
		if *startRate > 0 && i > 0 {
			if err := benchutil.Sleep(ctx, time.Duration(float64(time.Second) / *startRate)); err != nil {
				f.stop()
				return nil, err
			}
		}
		st, err := b.store(i)
		if err != nil {
			f.stop()
			return nil, err
		}
		cand := versiongate.CandidateFunc(func(ctx context.Context) (versiongate.Term, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		})
		if i == 0 {
			var once atomic.Bool
			cand = func(ctx context.Context) (versiongate.Term, error) {
				if once.Swap(true) {
					<-ctx.Done()
					return nil, ctx.Err()
				}
				return versiongatetest.NewTerm("node-0", 1), nil
			}
		}
		g, err := versiongate.New(versiongate.Config{
			Store:                    &countingStore{Store: st, n: &f.calls},
			NodeID:                   fmt.Sprintf("node-%d", i),
			Version:                  v,
			MinimumCompatibleRelease: v.Release,
			RecordTTL:                *ttl,
			SettleTime:               -1,
			ReconcileInterval:        time.Hour,
			Candidate:                cand,
			Reconcile:                func(context.Context, versiongate.Term) error { return nil },
			Metrics: versiongate.MetricsFunc(func(o versiongate.Observation) {
				if o.Event == versiongate.EventRecordLost {
					f.lost.Add(1)
				}
				if o.Event == versiongate.EventKeepAlive {
					f.mu.Lock()
					f.keepAlives = append(f.keepAlives, o.Latency)
					f.mu.Unlock()
				}
			}),
		})
		if err != nil {
			f.stop()
			return nil, err
		}
		f.gates = append(f.gates, g)
		f.wg.Add(1)
		gctx := ctx
		if log, err := logr.FromContext(ctx); err == nil {
			gctx = logr.NewContext(ctx, log.WithValues("node", i))
		}
		go func() {
			defer f.wg.Done()
			if err := g.Run(gctx); err != nil && ctx.Err() == nil {
				f.errs <- fmt.Errorf("node-%d: %w", i, err)
			}
		}()
	}
	// Ready everywhere, and the leader done: the steady state.
	started := time.Now()
	rctx, rcancel := context.WithTimeout(ctx, *readyIn)
	defer rcancel()
	for i, g := range f.gates {
		wctx, wcancel := context.WithCancel(rctx)
		err := g.WaitReady(wctx)
		wcancel()
		if err != nil {
			f.stop()
			f.mu.Lock()
			p99 := benchutil.Pct(f.keepAlives, 99)
			f.mu.Unlock()
			return nil, fmt.Errorf("node-%d not ready %v after the last gate started (%d of %d ready before it; %d records lost; renewal latency p99 %v): %w",
				i, time.Since(started).Round(time.Second), i, n, f.lost.Load(), p99.Round(time.Millisecond), err)
		}
	}
	for f.gates[0].Phase() != versiongate.PhaseDone {
		if err := f.failed(); err != nil {
			f.stop()
			return nil, err
		}
		if err := benchutil.Sleep(ctx, 100*time.Millisecond); err != nil {
			f.stop()
			return nil, err
		}
	}
	return f, nil
}

// failed returns the first error a gate's Run returned, if any.
func (f *fleet) failed() error {
	select {
	case err := <-f.errs:
		return err
	default:
		return nil
	}
}

func (f *fleet) stop() {
	f.cancel()
	f.wg.Wait()
}

// steady runs n gates to their steady state, then counts the requests over
// the window.
func steady(ctx context.Context, b backend, n int, window time.Duration) (wire, calls, rx float64, err error) {
	f, err := startFleet(ctx, b, n)
	if err != nil {
		return 0, 0, 0, err
	}
	defer f.stop()
	// One TTL for the start-up traffic to end.
	if err := benchutil.Sleep(ctx, *ttl); err != nil {
		return 0, 0, 0, err
	}
	w0, c0, e0 := b.wire(), f.calls.Load(), b.received()
	if err := benchutil.Sleep(ctx, window); err != nil {
		return 0, 0, 0, err
	}
	if err := f.failed(); err != nil {
		return 0, 0, 0, err
	}
	per := float64(n) * window.Minutes()
	return float64(b.wire()-w0) / per, float64(f.calls.Load()-c0) / per, float64(b.received()-e0) / per, nil
}

// tell has the given number of nodes watch the status, then writes it
// rounds times and times each write until every watcher has seen it.
func tell(ctx context.Context, b backend, watchers, rounds int) ([]time.Duration, error) {
	if err := b.reset(ctx); err != nil {
		return nil, err
	}
	writer, err := b.store(0)
	if err != nil {
		return nil, err
	}
	term := versiongatetest.NewTerm("writer", 1)
	if err := writer.Fence(ctx, term); err != nil {
		return nil, err
	}
	encode := func(minor uint64) []byte {
		v := versiongate.Version{Release: versiongate.Release{Major: 1, Minor: minor}}
		b, _ := versiongate.Status{State: versiongate.StateDone, Version: v, MinimumCompatibleRelease: v.Release}.Encode()
		return b
	}
	if err := writer.WriteStatus(ctx, term, encode(0), 0); err != nil {
		return nil, err
	}
	st, err := writer.ReadStatus(ctx)
	if err != nil {
		return nil, err
	}

	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// seen[i] is the newest minor version watcher i has seen.
	seen := make([]atomic.Uint64, watchers)
	kick := make(chan struct{}, 1)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	started := make(chan struct{}, watchers)
	for i := range watchers {
		s, err := b.store(i + 1)
		if err != nil {
			return nil, err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			started <- struct{}{}
			for wctx.Err() == nil {
				_ = s.WatchStatus(wctx, st.Revision, func(cur versiongate.StoredStatus) bool {
					if d, err := versiongate.DecodeStatus(cur.Value); err == nil {
						seen[i].Store(d.Version.Release.Minor)
						select {
						case kick <- struct{}{}:
						default:
						}
					}
					return false
				})
			}
		}()
	}
	for range watchers {
		<-started
	}
	// Give every watch time to be established on the server.
	if err := benchutil.Sleep(ctx, time.Second); err != nil {
		return nil, err
	}
	var told []time.Duration
	for r := 1; r <= rounds; r++ {
		if err := writer.WriteStatus(ctx, term, encode(uint64(r)), 0); err != nil {
			return nil, err
		}
		t1 := time.Now()
		deadline := time.After(time.Minute)
		for !allSeen(seen, uint64(r)) {
			select {
			case <-kick:
			case <-deadline:
				return nil, fmt.Errorf("round %d: not every watcher saw the status within a minute", r)
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		// Timed from the write's return, when the leader goes on.
		told = append(told, time.Since(t1))
	}
	return told, nil
}

func allSeen(seen []atomic.Uint64, minor uint64) bool {
	for i := range seen {
		if seen[i].Load() < minor {
			return false
		}
	}
	return true
}

// bigResult is what the large run measures.
type bigResult struct {
	// server and client are CPU per second over the window and RSS at its
	// end: the servers' processes, and this process (every gate's client).
	serverCPU, clientCPU float64
	serverRSS, clientRSS uint64
	// rxPerNodeMin are the bytes the clients received, per node per
	// minute: the watch streams' fan-out shows here.
	rxPerNodeMin float64
	// keepAliveP99 is the 99th percentile of the acknowledged renewals'
	// latency over the window.
	keepAliveP99 time.Duration
	// startup is the time from the first gate's start to every gate ready
	// and the leader done.
	startup time.Duration
}

// large runs n gates and measures the servers' and this process's CPU per
// second over the window, and their RSS at its end.
func large(ctx context.Context, b backend, n int, window time.Duration) (r bigResult, err error) {
	t := time.Now()
	f, err := startFleet(ctx, b, n)
	if err != nil {
		return r, err
	}
	defer f.stop()
	r.startup = time.Since(t)
	if err := benchutil.Sleep(ctx, *ttl); err != nil {
		return r, err
	}
	if err := f.failed(); err != nil {
		return r, err
	}
	s0, err := b.stat()
	if err != nil {
		return r, err
	}
	c0, err := servers.SelfStat()
	if err != nil {
		return r, err
	}
	e0 := b.received()
	f.mu.Lock()
	f.keepAlives = f.keepAlives[:0]
	f.mu.Unlock()
	t0 := time.Now()
	if err := benchutil.Sleep(ctx, window); err != nil {
		return r, err
	}
	s1, err := b.stat()
	if err != nil {
		return r, err
	}
	c1, err := servers.SelfStat()
	if err != nil {
		return r, err
	}
	el := time.Since(t0)
	if err := f.failed(); err != nil {
		return r, err
	}
	f.mu.Lock()
	r.keepAliveP99 = benchutil.Pct(f.keepAlives, 99)
	f.mu.Unlock()
	r.serverCPU = (s1.CPU - s0.CPU).Seconds() / el.Seconds()
	r.clientCPU = (c1.CPU - c0.CPU).Seconds() / el.Seconds()
	r.serverRSS, r.clientRSS = s1.RSS, c1.RSS
	r.rxPerNodeMin = float64(b.received()-e0) / (float64(n) * el.Minutes())
	return r, nil
}

// countingStore counts the store calls a gate makes (a watch counts once,
// when it starts).
type countingStore struct {
	versiongate.Store
	n *atomic.Int64
}

func (s *countingStore) PublishRecord(ctx context.Context, id string, value []byte, ttl time.Duration) (versiongate.RecordLease, error) {
	s.n.Add(1)
	return s.Store.PublishRecord(ctx, id, value, ttl)
}

func (s *countingStore) KeepAlive(ctx context.Context, l versiongate.RecordLease) (time.Duration, error) {
	s.n.Add(1)
	return s.Store.KeepAlive(ctx, l)
}

func (s *countingStore) DeleteRecord(ctx context.Context, l versiongate.RecordLease) error {
	s.n.Add(1)
	return s.Store.DeleteRecord(ctx, l)
}

func (s *countingStore) ListRecords(ctx context.Context) ([]versiongate.Record, int64, error) {
	s.n.Add(1)
	return s.Store.ListRecords(ctx)
}

func (s *countingStore) WatchRecords(ctx context.Context, rev int64, fn func([]versiongate.Record, int64)) error {
	s.n.Add(1)
	return s.Store.WatchRecords(ctx, rev, fn)
}

func (s *countingStore) ReadStatus(ctx context.Context) (versiongate.StoredStatus, error) {
	s.n.Add(1)
	return s.Store.ReadStatus(ctx)
}

func (s *countingStore) WatchStatus(ctx context.Context, rev int64, fn func(versiongate.StoredStatus) bool) error {
	s.n.Add(1)
	return s.Store.WatchStatus(ctx, rev, fn)
}

func (s *countingStore) Fence(ctx context.Context, t versiongate.Term) error {
	s.n.Add(1)
	return s.Store.Fence(ctx, t)
}

func (s *countingStore) WriteStatus(ctx context.Context, t versiongate.Term, value []byte, nodesRev int64) error {
	s.n.Add(1)
	return s.Store.WriteStatus(ctx, t, value, nodesRev)
}
