package fleetsim

import (
	"context"
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/reconkit/reconkit/lbrecon"
	"github.com/reconkit/reconkit/lbrecon/lbrecontest"
)

// poller reads one ConfigMap every period until ctx ends: a well-behaved
// agent, whatever the apiserver answers.
func poller(period time.Duration) Agent {
	return func(ctx context.Context, d Deps) error {
		t := time.NewTicker(period)
		defer t.Stop()
		for {
			_, _ = d.Kube.CoreV1().ConfigMaps("default").Get(ctx, "settings", metav1.GetOptions{})
			select {
			case <-ctx.Done():
				return nil
			case <-t.C:
			}
		}
	}
}

// simulate runs cfg in a bubble of its own and returns its result.
func simulate(t *testing.T, cfg Config) Result {
	t.Helper()
	var r Result
	synctest.Test(t, func(t *testing.T) {
		r = Simulate(t.Context(), cfg)
		time.Sleep(24 * time.Hour) // goroutines a test's agent leaked on purpose end
	})
	return r
}

// only returns the one violation r holds, failing the test unless it holds
// exactly one of inv (the run ends at the first).
func only(t *testing.T, r Result, inv Invariant) Violation {
	t.Helper()
	if len(r.Violations) == 0 {
		t.Fatalf("no violation, want %s; timeline:\n%s", inv, Window(r.Timeline, 0, 0, time.Hour))
	}
	v := r.Violations[0]
	if v.Invariant != inv {
		t.Fatalf("first violation %s, want %s:\n%v", v.Invariant, inv, r.Err())
	}
	return v
}

// A well-behaved fleet under every kind of fault violates nothing, and the
// report counts its agent time.
func TestWellBehavedFleet(t *testing.T) {
	r := simulate(t, Config{Agent: poller(time.Second), Duration: 10 * time.Minute, Quiet: time.Minute})
	if err := r.Err(); err != nil {
		t.Fatal(err)
	}
	if r.Events == 0 {
		t.Error("the nemesis made no event in 10 minutes")
	}
	if r.AgentTime < 25*time.Minute {
		t.Errorf("agents ran %s in all, want about 3 × 11 minutes less crashes", r.AgentTime)
	}
}

// An agent whose loop retries at once, without waiting, is caught spinning
// at one instant of simulated time.
func TestSpinningAgent(t *testing.T) {
	spin := func(ctx context.Context, d Deps) error {
		for ctx.Err() == nil {
			_, _ = d.Kube.CoreV1().ConfigMaps("default").Get(ctx, "missing", metav1.GetOptions{})
		}
		return nil
	}
	v := only(t, simulate(t, Config{Agent: spin}), RequestBudget)
	if !strings.Contains(v.Detail, "one instant") {
		t.Errorf("violation %q, want it to say the requests came at one instant", v.Detail)
	}
}

// An agent that sends a request every 50ms, slower than a spin but above
// the budget of 600 a minute, is caught within its first minute.
func TestChattyAgent(t *testing.T) {
	v := only(t, simulate(t, Config{Agent: poller(50 * time.Millisecond)}), RequestBudget)
	if v.At > time.Minute {
		t.Errorf("caught at %s, want within the first minute", v.At)
	}
}

// An agent whose Run returns before its goroutines end is caught when it
// stops.
func TestLeakingAgent(t *testing.T) {
	leak := func(ctx context.Context, d Deps) error {
		go func() { time.Sleep(time.Hour) }() // outlives Run
		<-ctx.Done()
		return nil
	}
	v := only(t, simulate(t, Config{Agent: leak, Nemesis: Nemesis{}.Only(Crash)}), Stops)
	if !strings.Contains(v.Detail, "goroutines left") {
		t.Errorf("violation %q, want it to name the goroutines left", v.Detail)
	}
}

// An agent that does not return when its context ends is caught after
// StopTimeout.
func TestStuckAgent(t *testing.T) {
	stuck := func(ctx context.Context, d Deps) error {
		<-ctx.Done()
		time.Sleep(time.Hour)
		return nil
	}
	v := only(t, simulate(t, Config{Agent: stuck, Nemesis: Nemesis{}.Only(Crash)}), Stops)
	if !strings.Contains(v.Detail, "has not returned") {
		t.Errorf("violation %q", v.Detail)
	}
}

// An agent whose Run returns an error while its context is live is caught.
func TestDyingAgent(t *testing.T) {
	die := func(ctx context.Context, d Deps) error {
		if d.Index == 1 {
			return errors.New("configuration refused")
		}
		<-ctx.Done()
		return nil
	}
	if v := only(t, simulate(t, Config{Agent: die}), Lives); v.Agent != "agent-1" {
		t.Errorf("blamed %q, want agent-1", v.Agent)
	}
}

// writer is an agent that creates one object a minute carrying token, and
// keeps its context live.
func writer(token func(d Deps) uint64) Agent {
	return func(ctx context.Context, d Deps) error {
		ctx = lbrecon.WithToken(ctx, token(d))
		t := time.NewTicker(time.Minute)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return nil
			case <-t.C:
				_, _ = d.Engine.Create(ctx, lbrecon.Object{Kind: lbrecon.KindBackend, Name: d.Name, Tags: []string{"t"}})
			}
		}
	}
}

// Two agents that both believe they lead, with different tokens, are
// caught at the higher one's first write while the lower one's context is
// live.
func TestTwoLiveTerms(t *testing.T) {
	r := simulate(t, Config{Agents: 2, Agent: writer(func(d Deps) uint64 { return uint64(d.Index + 1) }),
		Nemesis: Nemesis{}.Only(PartitionAPIServer)})
	v := only(t, r, OneTerm)
	if !strings.Contains(v.Detail, "term 0x1 is live") {
		t.Errorf("violation %q, want it to name the live lower term", v.Detail)
	}
}

// With the fence's check dropped (a nil admit lets every token through),
// a lower token reaching the provider after a higher one is caught.
func TestFenceOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := &world{cfg: Config{}.withDefaults(), tl: &timeline{start: time.Now()}, failed: make(chan struct{}),
			abort: func() {}}
		w.engine = lbrecontest.New(w.cfg.Provider)
		p := &passed{w: w, e: w.engine}
		ctx := context.Background()
		for _, token := range []uint64{2, 3, 1} {
			_, _ = p.Create(lbrecon.WithToken(ctx, token), lbrecon.Object{Kind: lbrecon.KindBackend, Name: "b"})
		}
		if len(w.violations) != 1 || w.violations[0].Invariant != FenceOrder {
			t.Fatalf("violations %v, want one %s", w.violations, FenceOrder)
		}
	})
}

// A failed run's report names the seed, how to run it again, and the
// timeline around the violation, with the requests that broke the budget.
func TestReport(t *testing.T) {
	r := simulate(t, Config{Seed: 7, Agent: poller(50 * time.Millisecond), Nemesis: Nemesis{}.Only(Crash)})
	err := r.Err()
	if err == nil {
		t.Fatal("no violation")
	}
	for _, want := range []string{"seed 7", "-fleetsim.seed=7", "request-budget", "starts (run 1)", "get configmaps settings"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the report lacks %q:\n%v", want, err)
		}
	}
}

// A fleet whose agents do nothing but wait on timers replays exactly: the
// nemesis's schedule is the seed's alone.
func TestReplayRate(t *testing.T) {
	rate, parted := ReplayRate(t, Config{Agent: poller(time.Second), Duration: 5 * time.Minute, Quiet: time.Minute}, 3, 3)
	if rate != 1 {
		t.Errorf("replay rate %.2f, want 1: %s", rate, parted)
	}
}

// creator is an agent whose first member creates objs once, with a token,
// and then waits.
func creator(objs ...lbrecon.Object) Agent {
	return func(ctx context.Context, d Deps) error {
		if d.Index == 0 && d.Boot == 0 {
			for _, o := range objs {
				if _, err := d.Engine.Create(lbrecon.WithToken(ctx, 1), o); err != nil {
					return err
				}
			}
		}
		<-ctx.Done()
		return nil
	}
}

// An object left without the fleet's tag is a leak, and two tagged objects
// of one kind and name a duplicate: the run does not converge.
func TestLeakedAndDuplicateObjects(t *testing.T) {
	for name, objs := range map[string][]lbrecon.Object{
		"not tagged": {{Kind: lbrecon.KindBackend, Name: "b"}},
		"exists twice": {{Kind: lbrecon.KindBackend, Name: "b", Tags: []string{"t"}},
			{Kind: lbrecon.KindBackend, Name: "b", Tags: []string{"t"}}},
	} {
		t.Run(name, func(t *testing.T) {
			v := only(t, simulate(t, Config{Agent: creator(objs...), Tag: "t", Duration: time.Minute, Quiet: time.Minute,
				Nemesis: Nemesis{}.Only(RestartAPIServer)}), Converges)
			if !strings.Contains(v.Detail, name) {
				t.Errorf("violation %q, want it to say %q", v.Detail, name)
			}
		})
	}
}

// An agent that watches again at once whenever its watch ends spins once
// the nemesis ends every watch at once.
func TestWatchSpinsOnEmptyWatches(t *testing.T) {
	rewatch := func(ctx context.Context, d Deps) error {
		for ctx.Err() == nil {
			w, err := d.Kube.CoreV1().ConfigMaps("default").Watch(ctx, metav1.ListOptions{})
			if err != nil {
				if !sleepCtx(ctx, time.Second) {
					return nil
				}
				continue
			}
			drain(ctx, w)
		}
		return nil
	}
	v := only(t, simulate(t, Config{Agent: rewatch, Nemesis: Nemesis{}.Only(EmptyWatches)}), RequestBudget)
	if !strings.Contains(v.Detail, "watch configmaps") {
		t.Errorf("violation %q, want it to name the watches", v.Detail)
	}
}

// drain reads w until it ends or ctx does, and stops it.
func drain(ctx context.Context, w watch.Interface) {
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case _, ok := <-w.ResultChan():
			if !ok {
				return
			}
		}
	}
}

// Creation failures the nemesis injected and the agents have not spent yet
// end with the quiet period: it judges the agents' liveness, not the
// faults' count.
func TestQuietEndsCreationFailures(t *testing.T) {
	retry := func(ctx context.Context, d Deps) error {
		ctx = lbrecon.WithToken(ctx, 1)
		// Every 4 minutes, from when failures have piled up.
		for d.Index == 0 && d.Boot == 0 && sleepCtx(ctx, 4*time.Minute) {
			_, err := d.Engine.Create(ctx, lbrecon.Object{Kind: lbrecon.KindBackend, Name: "b", Tags: []string{"t"}})
			if err == nil {
				break
			}
		}
		<-ctx.Done()
		return nil
	}
	one := func([]Deps) func([]lbrecon.Object) bool {
		return func(objs []lbrecon.Object) bool { return len(objs) == 1 }
	}
	r := simulate(t, Config{Agent: retry, Tag: "t", Converged: one, Duration: 5 * time.Minute,
		Nemesis: Nemesis{Every: 5 * time.Second}.Only(ProviderFailCreate)})
	if err := r.Err(); err != nil {
		t.Fatal(err)
	}
}

// getMissing reads a ConfigMap that does not exist, a persistent 404,
// again after each pause pause returns, until ctx ends.
func getMissing(pause func(attempt int) time.Duration) Agent {
	return func(ctx context.Context, d Deps) error {
		for attempt := 0; ; attempt++ {
			_, _ = d.Kube.CoreV1().ConfigMaps("default").Get(ctx, "missing", metav1.GetOptions{})
			if !sleepCtx(ctx, pause(attempt)) {
				return nil
			}
		}
	}
}

// A loop that retries a persistent answer every 100ms, ten requests a
// second, breaks the budget of one kind of request within its first
// minute (the project's rule: at most one a second after 30 s), though
// it stays within the budget of all requests.
func TestFixedRetryBreaksBudget(t *testing.T) {
	v := only(t, simulate(t, Config{Agent: getMissing(func(int) time.Duration { return 100 * time.Millisecond }),
		Nemesis: Nemesis{}.Only(), Duration: 5 * time.Minute, Quiet: time.Minute}), RequestBudget)
	if !strings.Contains(v.Detail, `"get configmaps missing"`) || !strings.Contains(v.Detail, "of one kind") {
		t.Errorf("violation %q, want it to name the kind of request", v.Detail)
	}
	if v.At > 30*time.Second {
		t.Errorf("caught at %s, want within 30s", v.At)
	}
}

// A loop that retries a persistent answer after a pause doubling from
// 100ms to 1s, with jitter of ±50%, keeps within the budget for as long
// as the answer lasts.
func TestBackedOffRetryWithinBudget(t *testing.T) {
	pause := func(attempt int) time.Duration {
		d := min(100*time.Millisecond<<min(attempt, 10), time.Second)
		return d/2 + rand.N(d)
	}
	r := simulate(t, Config{Agent: getMissing(pause), Nemesis: Nemesis{}.Only(), Duration: 10 * time.Minute, Quiet: time.Minute})
	if err := r.Err(); err != nil {
		t.Fatal(err)
	}
}

// watchFrom is an agent that watches the ConfigMaps from a listing's
// resourceVersion and, whenever its watch ends, watches again a second
// later: from a fresh listing's resourceVersion when relist says so,
// else from the one it had.
func watchFrom(relist bool) Agent {
	return func(ctx context.Context, d Deps) error {
		rv := ""
		for ctx.Err() == nil {
			if rv == "" || relist {
				list, err := d.Kube.CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{})
				if err != nil {
					if !sleepCtx(ctx, time.Second) {
						return nil
					}
					continue
				}
				rv = list.ResourceVersion
			}
			if w, err := d.Kube.CoreV1().ConfigMaps("default").Watch(ctx, metav1.ListOptions{ResourceVersion: rv}); err == nil {
				drain(ctx, w)
			}
			if !sleepCtx(ctx, time.Second) {
				return nil
			}
		}
		return nil
	}
}

// An agent that watches again from the resourceVersion an apiserver
// restart made unwatchable is caught at its second watch from it; one
// that reads afresh after each watch passes.
func TestGoneRewatch(t *testing.T) {
	n := Nemesis{Every: time.Minute}.Only(RestartAPIServer)
	v := only(t, simulate(t, Config{Agent: watchFrom(false), Nemesis: n}), GoneRewatch)
	if !strings.Contains(v.Detail, "configmaps default from resourceVersion") {
		t.Errorf("violation %q, want it to name the watch", v.Detail)
	}
	if err := simulate(t, Config{Agent: watchFrom(true), Nemesis: n, Duration: 10 * time.Minute}).Err(); err != nil {
		t.Fatal(err)
	}
}
