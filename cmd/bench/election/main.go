package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/klog/v2"

	"github.com/reconkit/reconkit/cmd/bench/internal/benchutil"
	"github.com/reconkit/reconkit/election"
	"github.com/reconkit/reconkit/election/etcd"
	"github.com/reconkit/reconkit/election/lease"
	"github.com/reconkit/reconkit/internal/servers"
)

var (
	leaseDuration = flag.Duration("lease-duration", lease.DefaultLeaseDuration, "LeaseDuration on both sides")
	renewDeadline = flag.Duration("renew-deadline", lease.DefaultRenewDeadline, "RenewDeadline on both sides")
	retryPeriod   = flag.Duration("retry-period", lease.DefaultRetryPeriod, "RetryPeriod on both sides")
	handovers     = flag.Int("handovers", 50, "graceful handovers per implementation")
	failovers     = flag.Int("failovers", 3, "crash failovers per implementation")
	idle          = flag.Duration("idle", 20*time.Second, "window over which follower requests are counted")
	ttl           = flag.Duration("ttl", etcd.DefaultSessionTTL, "etcd session TTL on both etcd sides")
)

const namespace = "bench"

func main() {
	flag.Parse()
	klog.SetLogger(logr.Discard()) // client-go's election logs every attempt
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "election bench:", err)
		os.Exit(1)
	}
}

func run() error {
	ctx, cancel := context.WithCancel(context.Background())
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
	admin, err := kubernetes.NewForConfig(a.Config())
	if err != nil {
		return err
	}
	if _, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	b := &bench{a: a, admin: admin}
	rtt, err := b.roundTrip(ctx)
	if err != nil {
		return err
	}

	start := time.Now()
	logf("durations %v/%v/%v; apiserver round trip (Lease GET, median) %v", *leaseDuration, *renewDeadline, *retryPeriod, rtt.Round(time.Microsecond))

	// Everything bounded by timers (client-go's handovers wait for its
	// polls, crash failovers for the lease duration, the request count for
	// its window) runs side by side, each on its own Lease or prefix; the
	// handovers of ours and of etcd's concurrency, a matter of
	// milliseconds, run alone afterwards.
	var (
		wg                           sync.WaitGroup
		oursIdle, cgIdle             float64
		oursCrash, cgCrash, cgHand   []time.Duration
		oursDetect, cgDetect         []time.Duration
		cgCutFailover                []time.Duration
		errIdleO, errIdleC, errHandC error
		errCrashO, errCrashC, errCut error
		etcdRes                      [2]etcdResult
	)
	kinds := b.etcdKinds()
	logf("client-go: %d handovers; all: %d crash failovers and partitions, follower requests over %v ...", *handovers, *failovers, *idle)
	wg.Add(4 + len(kinds))
	go func() { defer wg.Done(); cgHand, errHandC = b.clientGoHandover(ctx) }()
	go func() {
		defer wg.Done()
		oursIdle, errIdleO = b.oursIdle(ctx)
		oursCrash, oursDetect, errCrashO = b.oursCrash(ctx)
	}()
	go func() {
		defer wg.Done()
		cgIdle, errIdleC = b.clientGoIdle(ctx)
		cgCrash, errCrashC = b.clientGoCrash(ctx)
	}()
	go func() { defer wg.Done(); cgCutFailover, cgDetect, errCut = b.clientGoCut(ctx) }()
	for i, k := range kinds {
		go func() {
			defer wg.Done()
			r := &etcdRes[i]
			if r.idle, r.err = b.etcdIdle(ctx, k); r.err != nil {
				return
			}
			r.failover, r.detect, r.err = b.etcdCutOff(ctx, k, *failovers)
		}()
	}
	wg.Wait()
	if err := errors.Join(errHandC, errIdleO, errIdleC, errCrashO, errCrashC, errCut, etcdRes[0].err, etcdRes[1].err); err != nil {
		return err
	}
	logf("ours: %d handovers; etcd: %d handovers each ...", *handovers, *handovers)
	oursHand, err := b.oursHandover(ctx)
	if err != nil {
		return err
	}
	for i, k := range kinds {
		if etcdRes[i].handover, err = b.etcdHandover(ctx, k); err != nil {
			return err
		}
	}

	bound := *leaseDuration + rtt
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(w, "Kubernetes Lease\tLease backend\tclient-go\tclient-go / ours\t\n")
	row := func(name string, o, c time.Duration) {
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t\n", name, ms(o), ms(c), benchutil.Ratio(float64(c), float64(o)))
	}
	row(fmt.Sprintf("handover p50 (n=%d)", len(oursHand)), benchutil.Pct(oursHand, 50), benchutil.Pct(cgHand, 50))
	row("handover p99", benchutil.Pct(oursHand, 99), benchutil.Pct(cgHand, 99))
	row("handover max", benchutil.Pct(oursHand, 100), benchutil.Pct(cgHand, 100))
	row(fmt.Sprintf("crash failover p50 (n=%d)", len(oursCrash)), benchutil.Pct(oursCrash, 50), benchutil.Pct(cgCrash, 50))
	row("crash failover max", benchutil.Pct(oursCrash, 100), benchutil.Pct(cgCrash, 100))
	fmt.Fprintf(w, "crash failover bound (LeaseDuration + RTT)\t%s\t%s\t\t\n", ms(bound), ms(bound))
	fmt.Fprintf(w, "follower requests/s while a leader holds\t%.3f\t%.3f\t%s\t\n", oursIdle, cgIdle, benchutil.Ratio(cgIdle, oursIdle))
	row(fmt.Sprintf("partition: cut → leader's context ends p50 (n=%d)", len(oursDetect)), benchutil.Pct(oursDetect, 50), benchutil.Pct(cgDetect, 50))
	row("partition: cut → leader's context ends max", benchutil.Pct(oursDetect, 100), benchutil.Pct(cgDetect, 100))
	row("partition: cut → follower leads (client-go: ReleaseOnCancel) p50", benchutil.Pct(oursCrash, 50), benchutil.Pct(cgCutFailover, 50))
	fmt.Fprintf(w, "\t\t\t\t\n")
	o, c := etcdRes[0], etcdRes[1]
	fmt.Fprintf(w, "etcd\tetcd backend\tconcurrency\tconcurrency / ours\t\n")
	row(fmt.Sprintf("handover p50 (n=%d)", len(o.handover)), benchutil.Pct(o.handover, 50), benchutil.Pct(c.handover, 50))
	row("handover p99", benchutil.Pct(o.handover, 99), benchutil.Pct(c.handover, 99))
	row(fmt.Sprintf("crash failover p50 (n=%d)", len(o.failover)), benchutil.Pct(o.failover, 50), benchutil.Pct(c.failover, 50))
	row("crash failover max", benchutil.Pct(o.failover, 100), benchutil.Pct(c.failover, 100))
	fmt.Fprintf(w, "crash failover bound (TTL + RTT)\t%s\t%s\t\t\n", ms(*ttl+rtt), ms(*ttl+rtt))
	fmt.Fprintf(w, "follower requests/s while a leader holds\t%.3f\t%.3f\t%s\t\n", o.idle, c.idle, benchutil.Ratio(c.idle, o.idle))
	row(fmt.Sprintf("partition: cut → leader's context ends p50 (n=%d)", len(o.detect)), benchutil.Pct(o.detect, 50), benchutil.Pct(c.detect, 50))
	row("partition: cut → leader's context ends max", benchutil.Pct(o.detect, 100), benchutil.Pct(c.detect, 100))
	w.Flush()
	logf("total %v", time.Since(start).Round(time.Second))
	return nil
}

// etcdResult holds one etcd implementation's figures.
type etcdResult struct {
	handover, failover, detect []time.Duration
	idle                       float64
	err                        error
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond)) }

type bench struct {
	a     *servers.APIServer
	admin kubernetes.Interface
	seq   atomic.Int64
}

func (b *bench) leaseName(prefix string) string {
	return fmt.Sprintf("%s-%d", prefix, b.seq.Add(1))
}

// roundTrip returns the median latency of a Lease GET (a 404 is fine).
func (b *bench) roundTrip(ctx context.Context) (time.Duration, error) {
	var ds []time.Duration
	for range 21 {
		t0 := time.Now()
		_, err := b.admin.CoordinationV1().Leases(namespace).Get(ctx, "absent", metav1.GetOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return 0, err
		}
		ds = append(ds, time.Since(t0))
	}
	return benchutil.Pct(ds, 50), nil
}

// counter counts the requests a client sends (a watch counts once, when
// it starts).
type counter struct{ n atomic.Int64 }

func (c *counter) wrap(cfg *rest.Config) *rest.Config { return benchutil.CountRequests(cfg, &c.n) }

func (b *bench) clientset(cfg *rest.Config) kubernetes.Interface {
	return kubernetes.NewForConfigOrDie(cfg)
}

func (b *bench) ours(cfg *rest.Config, name, id string) (*lease.Elector, error) {
	return lease.New(lease.Config{
		Client: b.clientset(cfg), Namespace: namespace, Name: name, Identity: id,
		LeaseDuration: *leaseDuration, RenewDeadline: *renewDeadline, RetryPeriod: *retryPeriod,
	})
}

// clientGo returns a client-go elector. onLead runs in OnStartedLeading.
func (b *bench) clientGo(cfg *rest.Config, name, id string, releaseOnCancel bool, onLead func(context.Context)) (*leaderelection.LeaderElector, error) {
	return leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: &resourcelock.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Namespace: namespace, Name: name},
			Client:     b.clientset(cfg).CoordinationV1(),
			LockConfig: resourcelock.ResourceLockConfig{Identity: id},
		},
		LeaseDuration: *leaseDuration, RenewDeadline: *renewDeadline, RetryPeriod: *retryPeriod,
		ReleaseOnCancel: releaseOnCancel,
		Name:            name,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: onLead,
			OnStoppedLeading: func() {},
		},
	})
}

// pause waits a random 200–700 ms between measurements, so that a
// watching follower has re-established its watch.
func pause(ctx context.Context) error {
	return wait(ctx, 200*time.Millisecond+rand.N(500*time.Millisecond))
}

// pollPhase waits 200 ms plus a random part of client-go's longest polling
// period (RetryPeriod × (1 + JitterFactor)), so that a resignation falls at
// a random point of the polling follower's cycle rather than just after
// the follower (re)started, which would flatter or penalise it.
func pollPhase(ctx context.Context) error {
	return wait(ctx, 200*time.Millisecond+rand.N(time.Duration(float64(*retryPeriod)*(1+leaderelection.JitterFactor))))
}

type won struct {
	l   election.Leadership
	at  time.Time
	err error
}

func campaign(ctx context.Context, e *lease.Elector) <-chan won {
	ch := make(chan won, 1)
	go func() {
		l, err := e.Campaign(ctx)
		ch <- won{l, time.Now(), err}
	}()
	return ch
}

// oursHandover measures Resign → the successor's Campaign returns.
func (b *bench) oursHandover(ctx context.Context) ([]time.Duration, error) {
	name := b.leaseName("handover-ours")
	var cands [2]*lease.Elector
	for i := range cands {
		e, err := b.ours(b.a.Config(), name, fmt.Sprintf("ours-%d", i))
		if err != nil {
			return nil, err
		}
		cands[i] = e
	}
	first := <-campaign(ctx, cands[0])
	if first.err != nil {
		return nil, first.err
	}
	cur, waiting := first.l, campaign(ctx, cands[1])
	var ds []time.Duration
	for i := range *handovers {
		if err := pause(ctx); err != nil {
			return nil, err
		}
		t0 := time.Now()
		if err := cur.Resign(ctx); err != nil {
			return nil, err
		}
		next := <-waiting
		if next.err != nil {
			return nil, next.err
		}
		ds = append(ds, next.at.Sub(t0))
		cur, waiting = next.l, campaign(ctx, cands[i%2])
	}
	if err := cur.Resign(ctx); err != nil {
		return nil, err
	}
	next := <-waiting
	if next.err == nil {
		return ds, next.l.Resign(ctx)
	}
	return ds, nil
}

// cgCandidate runs client-go electors one after another for one identity;
// each run ends when its context is cancelled.
type cgCandidate struct {
	b    *bench
	name string
	id   string
	led  chan cgTerm // a term started
}

type cgTerm struct {
	ctx    context.Context // OnStartedLeading's
	id     string
	at     time.Time
	cancel context.CancelFunc // ends the run (and, with ReleaseOnCancel, releases)
	done   <-chan struct{}    // closed when the run returned
}

// start runs one client-go elector until cancelled; it reports a term on
// c.led.
func (c *cgCandidate) start(ctx context.Context, releaseOnCancel bool, cfg *rest.Config) (context.CancelFunc, <-chan struct{}, error) {
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	le, err := c.b.clientGo(cfg, c.name, c.id, releaseOnCancel, func(lctx context.Context) {
		c.led <- cgTerm{ctx: lctx, id: c.id, at: time.Now(), cancel: cancel, done: done}
	})
	if err != nil {
		cancel()
		return nil, nil, err
	}
	go func() {
		defer close(done)
		le.Run(runCtx)
	}()
	return cancel, done, nil
}

// clientGoHandover measures cancel (ReleaseOnCancel) → the successor's
// OnStartedLeading.
func (b *bench) clientGoHandover(ctx context.Context) ([]time.Duration, error) {
	name := b.leaseName("handover-client-go")
	led := make(chan cgTerm, 2)
	var cands [2]*cgCandidate
	for i := range cands {
		cands[i] = &cgCandidate{b: b, name: name, id: fmt.Sprintf("client-go-%d", i), led: led}
	}
	byID := map[string]*cgCandidate{cands[0].id: cands[0], cands[1].id: cands[1]}
	var (
		runs    []<-chan struct{}
		cancels []context.CancelFunc
	)
	defer func() { // stop every run, then wait for them
		for _, c := range cancels {
			c()
		}
		for _, d := range runs {
			<-d
		}
	}()
	for _, c := range cands {
		cancel, done, err := c.start(ctx, true, b.a.Config())
		if err != nil {
			return nil, err
		}
		cancels, runs = append(cancels, cancel), append(runs, done)
	}
	cur := <-led
	var ds []time.Duration
	for range *handovers {
		if err := pollPhase(ctx); err != nil {
			return nil, err
		}
		t0 := time.Now()
		cur.cancel()
		next := <-led
		ds = append(ds, next.at.Sub(t0))
		<-cur.done
		cancel, done, err := byID[cur.id].start(ctx, true, b.a.Config())
		if err != nil {
			return nil, err
		}
		cancels, runs = append(cancels, cancel), append(runs, done)
		cur = next
	}
	return ds, nil
}

// oursCrash: the leader's traffic goes through a proxy that is cut (the
// leader falls silent, as a crashed process does, and never releases);
// measured from the cut to the follower's Campaign returning.
func (b *bench) oursCrash(ctx context.Context) (failover, detect []time.Duration, err error) {
	name := b.leaseName("crash-ours")
	var ds []time.Duration
	for i := range *failovers {
		p, err := servers.StartProxy(b.a.Addr())
		if err != nil {
			return nil, nil, err
		}
		leader, err := b.ours(b.a.ConfigFor(p.Addr()), name, fmt.Sprintf("ours-leader-%d", i))
		if err != nil {
			p.Close()
			return nil, nil, err
		}
		follower, err := b.ours(b.a.Config(), name, fmt.Sprintf("ours-follower-%d", i))
		if err != nil {
			p.Close()
			return nil, nil, err
		}
		first := <-campaign(ctx, leader)
		if first.err != nil {
			p.Close()
			return nil, nil, first.err
		}
		waiting := campaign(ctx, follower)
		if err := pause(ctx); err != nil {
			p.Close()
			return nil, nil, err
		}
		ended := make(chan time.Time, 1)
		go func() { <-first.l.Context().Done(); ended <- time.Now() }()
		t0 := time.Now()
		p.Cut()
		next := <-waiting
		if next.err != nil {
			p.Close()
			return nil, nil, next.err
		}
		ds = append(ds, next.at.Sub(t0))
		detect = append(detect, (<-ended).Sub(t0)) // lost by ValidUntil, long before
		p.Close()
		_ = first.l.Resign(ctx)
		if err := next.l.Resign(ctx); err != nil {
			return nil, nil, err
		}
	}
	return ds, detect, nil
}

// clientGoCrash: the leader's run is cancelled without ReleaseOnCancel, so
// it stops renewing and never releases; measured from the cancel to the
// follower's OnStartedLeading.
func (b *bench) clientGoCrash(ctx context.Context) ([]time.Duration, error) {
	name := b.leaseName("crash-client-go")
	var ds []time.Duration
	for i := range *failovers {
		led := make(chan cgTerm, 2)
		leader := &cgCandidate{b: b, name: name, id: fmt.Sprintf("client-go-leader-%d", i), led: led}
		follower := &cgCandidate{b: b, name: name, id: fmt.Sprintf("client-go-follower-%d", i), led: led}
		_, ldone, err := leader.start(ctx, false, b.a.Config())
		if err != nil {
			return nil, err
		}
		cur := <-led
		fcancel, fdone, err := follower.start(ctx, true, b.a.Config())
		if err != nil {
			return nil, err
		}
		if err := pause(ctx); err != nil {
			return nil, err
		}
		t0 := time.Now()
		cur.cancel()
		next := <-led
		ds = append(ds, next.at.Sub(t0))
		<-ldone
		fcancel()
		<-fdone
	}
	return ds, nil
}

// clientGoCut: the leader's traffic goes through a proxy that is cut, as
// in oursCrash; the leader runs with ReleaseOnCancel. It measures cut →
// the leader's OnStartedLeading context ends (client-go cancels it only
// after its renewals gave up at RenewDeadline and its release attempt
// returned) and cut → the follower's OnStartedLeading.
func (b *bench) clientGoCut(ctx context.Context) (failover, detect []time.Duration, err error) {
	name := b.leaseName("cut-client-go")
	for i := range *failovers {
		p, err := servers.StartProxy(b.a.Addr())
		if err != nil {
			return nil, nil, err
		}
		led := make(chan cgTerm, 2)
		leader := &cgCandidate{b: b, name: name, id: fmt.Sprintf("client-go-cut-leader-%d", i), led: led}
		follower := &cgCandidate{b: b, name: name, id: fmt.Sprintf("client-go-cut-follower-%d", i), led: led}
		lcancel, ldone, err := leader.start(ctx, true, b.a.ConfigFor(p.Addr()))
		if err != nil {
			p.Close()
			return nil, nil, err
		}
		cur := <-led
		fcancel, fdone, err := follower.start(ctx, true, b.a.Config())
		if err != nil {
			lcancel()
			p.Close()
			return nil, nil, err
		}
		if err := pause(ctx); err != nil {
			return nil, nil, err
		}
		ended := make(chan time.Time, 1)
		go func() { <-cur.ctx.Done(); ended <- time.Now() }()
		t0 := time.Now()
		p.Cut()
		next := <-led
		failover = append(failover, next.at.Sub(t0))
		detect = append(detect, (<-ended).Sub(t0))
		p.Restore()
		lcancel()
		<-ldone
		p.Close()
		fcancel()
		<-fdone
	}
	return failover, detect, nil
}

// oursIdle counts the requests one of our followers sends while the leader
// holds the lease.
func (b *bench) oursIdle(ctx context.Context) (float64, error) {
	name := b.leaseName("idle-ours")
	leader, err := b.ours(b.a.Config(), name, "ours-leader")
	if err != nil {
		return 0, err
	}
	var c counter
	follower, err := b.ours(c.wrap(b.a.Config()), name, "ours-follower")
	if err != nil {
		return 0, err
	}
	first := <-campaign(ctx, leader)
	if first.err != nil {
		return 0, first.err
	}
	fctx, fcancel := context.WithCancel(ctx)
	waiting := campaign(fctx, follower)
	n, err := c.countIdle(ctx)
	fcancel()
	<-waiting
	if err != nil {
		return 0, err
	}
	return float64(n) / idle.Seconds(), first.l.Resign(ctx)
}

// clientGoIdle counts the requests a client-go follower sends while the
// leader holds the lease.
func (b *bench) clientGoIdle(ctx context.Context) (float64, error) {
	name := b.leaseName("idle-client-go")
	led := make(chan cgTerm, 2)
	leader := &cgCandidate{b: b, name: name, id: "client-go-leader", led: led}
	follower := &cgCandidate{b: b, name: name, id: "client-go-follower", led: led}
	lcancel, ldone, err := leader.start(ctx, true, b.a.Config())
	if err != nil {
		return 0, err
	}
	defer func() { lcancel(); <-ldone }()
	<-led
	var c counter
	fcancel, fdone, err := follower.start(ctx, true, c.wrap(b.a.Config()))
	if err != nil {
		return 0, err
	}
	defer func() { fcancel(); <-fdone }()
	if err := settle(ctx); err != nil {
		return 0, err
	}
	n0 := c.n.Load()
	if err := wait(ctx, *idle); err != nil {
		return 0, err
	}
	return float64(c.n.Load()-n0) / idle.Seconds(), nil
}

// settle lets a new follower finish its start-up requests.
func settle(ctx context.Context) error { return wait(ctx, time.Second) }

// countIdle lets the candidates settle, then returns how many requests c
// counted during -idle.
func (c *counter) countIdle(ctx context.Context) (int64, error) {
	if err := settle(ctx); err != nil {
		return 0, err
	}
	n0 := c.n.Load()
	if err := wait(ctx, *idle); err != nil {
		return 0, err
	}
	return c.n.Load() - n0, nil
}

func wait(ctx context.Context, d time.Duration) error { return benchutil.Sleep(ctx, d) }
