package nodestatus_test

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sync/semaphore"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/reconkit/reconkit/kubefake"
	"github.com/reconkit/reconkit/nodestatus"
	"github.com/reconkit/reconkit/nodestatus/nodestatustest"
)

// countingLimiter is a shared semaphore that tells how many controllers
// wait for it and how many units are held.
type countingLimiter struct {
	sem *semaphore.Weighted

	mu                     sync.Mutex
	waiting, held, acquire int
}

func newCountingLimiter(n int64) *countingLimiter {
	return &countingLimiter{sem: semaphore.NewWeighted(n)}
}

func (l *countingLimiter) Acquire(ctx context.Context, n int64) error {
	l.mu.Lock()
	l.waiting++
	l.mu.Unlock()
	err := l.sem.Acquire(ctx, n)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.waiting--
	if err == nil {
		l.held += int(n)
		l.acquire++
	}
	return err
}

func (l *countingLimiter) Release(n int64) {
	l.mu.Lock()
	l.held -= int(n)
	if l.held < 0 {
		panic("nodestatus test: more units released than acquired")
	}
	l.mu.Unlock()
	l.sem.Release(n)
}

// state returns the controllers waiting and the units held.
func (l *countingLimiter) state() (waiting, held int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.waiting, l.held
}

func (l *countingLimiter) waitFor(t *testing.T, waiting, held int) {
	t.Helper()
	require.Eventually(t, func() bool {
		w, h := l.state()
		return w == waiting && h == held
	}, waitFor, time.Millisecond, "want %d waiting and %d held", waiting, held)
}

// requestGate holds requests until it is opened, and counts them.
type requestGate struct {
	open chan struct{}

	mu                sync.Mutex
	inFlight, maxSeen int
	total             int
	names             map[string]bool // of the requests let through or held
}

func newRequestGate() *requestGate {
	return &requestGate{open: make(chan struct{}), names: map[string]bool{}}
}

// pass counts a request for the named object, holds it until the gate is
// open, and lets it go.
func (g *requestGate) pass(name string) {
	g.mu.Lock()
	g.names[name] = true
	g.inFlight++
	g.total++
	g.maxSeen = max(g.maxSeen, g.inFlight)
	g.mu.Unlock()
	select {
	case <-g.open:
	case <-time.After(waitFor): // the test failed before opening it
	}
	g.mu.Lock()
	g.inFlight--
	g.mu.Unlock()
}

func (g *requestGate) seen(name string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.names[name]
}

// openAndWait lets the held registrations through, waits until every
// controller is Ready, and checks that the gate never saw more than units
// registrations at once, and one from each controller.
func (g *requestGate) openAndWait(t *testing.T, ctrls []*running, units int) {
	t.Helper()
	close(g.open)
	for _, c := range ctrls {
		waitReady(t, c)
	}
	_, maxSeen, total := g.counts()
	require.Equal(t, units, maxSeen, "never more registrations in flight than units")
	require.Equal(t, len(ctrls), total, "one registration per controller")
}

func (g *requestGate) counts() (inFlight, maxSeen, total int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.inFlight, g.maxSeen, g.total
}

// TestLimiterBoundsRegistration starts six controllers sharing a limiter of
// two, each on a clientset of its own (a fake clientset serializes its
// reactors), and holds their Node creations: two register at a time, the
// other four wait in Run without having started anything, and all are
// Ready once the creations are let through.
func TestLimiterBoundsRegistration(t *testing.T) {
	lim := newCountingLimiter(2)
	gate := newRequestGate()
	clk := newFakeClock()
	var providers []*nodestatustest.Provider
	var ctrls []*running
	for i := range 6 {
		cs := kubefake.NewClientset()
		cs.PrependReactor("create", "nodes", func(a k8stesting.Action) (bool, runtime.Object, error) {
			gate.pass(a.(k8stesting.CreateAction).GetObject().(*corev1.Node).Name)
			return false, nil, nil
		})
		p := nodestatustest.NewProvider(testNode(fmt.Sprintf("vk-%d", i)))
		providers = append(providers, p)
		cfg := fakeConfig(cs, clk, p)
		cfg.Node = testNode(fmt.Sprintf("vk-%d", i))
		cfg.Limiter = lim
		ctrls = append(ctrls, start(t, cfg))
	}
	lim.waitFor(t, 4, 2)
	require.Eventually(t, func() bool { f, _, _ := gate.counts(); return f == 2 }, waitFor, time.Millisecond)
	for i, p := range providers {
		if gate.seen(fmt.Sprintf("vk-%d", i)) {
			waitPings(t, p, 1)
		}
	}
	for i, p := range providers {
		if !gate.seen(fmt.Sprintf("vk-%d", i)) {
			require.Zero(t, p.Pings(), "vk-%d waits for the limiter and has started nothing", i)
		}
	}

	gate.openAndWait(t, ctrls, 2)
	lim.waitFor(t, 0, 0)
	for _, c := range ctrls {
		require.NoError(t, c.stop(t))
	}
	require.True(t, lim.sem.TryAcquire(2), "every unit is back")
}

// TestLimiterNotHeldAcrossRetryWaits: a controller whose registration fails
// returns its unit while it waits to retry, so another controller sharing a
// limiter of one registers meanwhile.
func TestLimiterNotHeldAcrossRetryWaits(t *testing.T) {
	lim := newCountingLimiter(1)
	clk := newFakeClock()

	failing := kubefake.NewClientset()
	patches := newRequestGate()
	close(patches.open)
	failing.PrependReactor("create", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		patches.pass("vk-a")
		return true, nil, apierrors.NewInternalError(fmt.Errorf("etcd is down"))
	})
	cfgA := fakeConfig(failing, clk, nil)
	cfgA.Node = testNode("vk-a")
	cfgA.Limiter = lim
	start(t, cfgA)
	require.Eventually(t, func() bool { _, _, n := patches.counts(); return n >= 1 }, waitFor, time.Millisecond, "the first registration failed")
	// A waits for its retry timer on the fake clock, which the test does
	// not step: A holds no unit while it waits.
	lim.waitFor(t, 0, 0)

	cs := kubefake.NewClientset()
	cfgB := fakeConfig(cs, clk, nil)
	cfgB.Node = testNode("vk-b")
	cfgB.Limiter = lim
	b := start(t, cfgB)
	waitReady(t, b)
	_, _, n := patches.counts()
	require.Equal(t, 1, n, "A did not retry: the clock did not move")

	// A's retry takes the unit again, and returns it. A returns its unit
	// before it arms its retry timer: the clock is stepped only once A
	// is idle (its retry wait armed), or the timer is armed a step late
	// and waits for a step that never comes.
	step(t, clk, time.Second)
	require.Eventually(t, func() bool { _, _, n := patches.counts(); return n >= 2 }, waitFor, time.Millisecond, "A retried")
	lim.waitFor(t, 0, 0)
}

// TestLimiterHoldsStatusWritesNotHeartbeats: once registered, a status
// write waits for a unit, and a lease renewal does not.
func TestLimiterHoldsStatusWritesNotHeartbeats(t *testing.T) {
	lim := newCountingLimiter(1)
	cs := kubefake.NewClientset()
	v := countVerbs(cs)
	clk := newFakeClock()
	p := nodestatustest.NewProvider(testNode("vk-0"))
	cfg := fakeConfig(cs, clk, p)
	cfg.Limiter = lim
	startReady(t, cfg)
	lim.waitFor(t, 0, 0)

	// Someone else holds the only unit.
	require.NoError(t, lim.Acquire(context.Background(), 1))
	patches := v.get("patch nodes/status")
	p.UpdateStatus(func(n *corev1.Node) { n.Labels["changed"] = "yes" })
	lim.waitFor(t, 1, 1) // the status write waits
	renewals := v.get("update leases")
	stepWhileBusy(t, clk, 10500*time.Millisecond) // the status job waits: idle would too
	require.Eventually(t, func() bool { return v.get("update leases") > renewals }, waitFor, time.Millisecond, "the lease is renewed while the limiter is full")
	require.Equal(t, patches, v.get("patch nodes/status"), "no status write without a unit")

	lim.Release(1)
	require.Eventually(t, func() bool { return v.get("patch nodes/status") > patches }, waitFor, time.Millisecond, "the status is written once a unit is free")
	lim.waitFor(t, 0, 0)
}

// TestLimiterWaitEndsWithContext: a Run waiting for a unit returns nil when
// its context ends, having sent nothing and pinged nothing.
func TestLimiterWaitEndsWithContext(t *testing.T) {
	lim := newCountingLimiter(1)
	require.NoError(t, lim.Acquire(context.Background(), 1))
	cs := kubefake.NewClientset()
	clk := newFakeClock()
	p := nodestatustest.NewProvider(testNode("vk-0"))
	cfg := fakeConfig(cs, clk, p)
	cfg.Limiter = lim
	c := start(t, cfg)
	lim.waitFor(t, 1, 1)
	require.NoError(t, c.stop(t))
	require.Empty(t, cs.Actions(), "no request")
	require.Zero(t, p.Pings(), "no ping")
	lim.Release(1)
	lim.waitFor(t, 0, 0)
	require.True(t, lim.sem.TryAcquire(1), "the waiting Run took no unit with it")
}

var _ nodestatus.Limiter = (*semaphore.Weighted)(nil)

// cancelOnNotify ends Run's context as soon as Run has started: when the
// provider is handed its callback, after the limiter's unit was taken.
type cancelOnNotify struct {
	nodestatus.NaiveNodeProvider
	cancel context.CancelFunc
}

func (p cancelOnNotify) NotifyNodeStatus(context.Context, func(*corev1.Node)) { p.cancel() }

// TestLimiterUnitReturnedWhenStoppedAtOnce: a Run whose context ends right
// after it took its unit, before the registration's first attempt, returns
// the unit.
func TestLimiterUnitReturnedWhenStoppedAtOnce(t *testing.T) {
	lim := newCountingLimiter(1)
	cs := kubefake.NewClientset()
	clk := newFakeClock()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cfg := fakeConfig(cs, clk, cancelOnNotify{cancel: cancel})
	cfg.Limiter = lim
	c, err := nodestatus.New(cfg)
	require.NoError(t, err)
	require.NoError(t, c.Run(ctx))
	require.Equal(t, 1, lim.acquire, "Run took a unit")
	require.Empty(t, cs.Actions(), "no request")
	lim.waitFor(t, 0, 0)
	require.True(t, lim.sem.TryAcquire(1), "the unit is back")
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }
