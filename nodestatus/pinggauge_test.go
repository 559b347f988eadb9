package nodestatus_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	testclock "k8s.io/utils/clock/testing"

	"github.com/reconkit/reconkit/kubefake"
	"github.com/reconkit/reconkit/nodestatus"
	"github.com/reconkit/reconkit/nodestatus/nodestatustest"
)

// A controller is quiet while a ping it started runs: the ping's timeout is
// an armed timer, and a ping that hangs must be timed out by a step. But a
// fake provider answers at once only once the scheduler runs its Ping's
// goroutine; on a loaded machine that goroutine may be preempted between
// the start of the ping and its result, and a step of PingTimeout or more
// in that window times out a ping that did not hang. So the step helpers
// (idle, step, stepUntil, stepWhileBusy, and eventually on the real
// server) do not step while a controller on the clock has a ping in flight,
// unless its provider's Ping said that it blocks on purpose
// (blockOnPurpose). start wraps every provider of a controller on a fake
// clock in a pingGauge, which keeps that count.

// pingGauge is a controller's provider, wrapped by start: it counts the
// Pings in flight that block on purpose.
type pingGauge struct {
	nodestatus.NodeProvider
	blocking atomic.Int32
	// heldBack counts the times quiet found the controller quiet but for
	// a ping in flight that does not block on purpose.
	heldBack atomic.Int64
}

// pingCall is one Ping through a pingGauge, found in its context.
type pingCall struct {
	g        *pingGauge
	blocking bool // only the Ping's own goroutine reads and writes it
}

type pingCallKey struct{}

// gaugePings wraps p (nil: the default provider) for start.
func gaugePings(p nodestatus.NodeProvider) *pingGauge {
	if p == nil {
		p = nodestatus.NaiveNodeProvider{}
	}
	return &pingGauge{NodeProvider: p}
}

// Ping calls the provider's Ping with a context that blockOnPurpose finds.
func (g *pingGauge) Ping(ctx context.Context) error {
	call := &pingCall{g: g}
	err := g.NodeProvider.Ping(context.WithValue(ctx, pingCallKey{}, call))
	if call.blocking {
		g.blocking.Add(-1)
	}
	return err
}

// blocked reports whether a Ping through g is blocking on purpose.
func (g *pingGauge) blocked() bool { return g.blocking.Load() > 0 }

// blockOnPurpose is called by a test provider's Ping, with the context it
// was given, before it blocks on purpose (until its context ends, or until
// the test lets it go): the step helpers may then step over it, so that its
// timeout fires. A provider that blocks without saying so holds every step
// helper until it returns, as a Ping preempted on a loaded machine must.
func blockOnPurpose(ctx context.Context) {
	call, ok := ctx.Value(pingCallKey{}).(*pingCall)
	if !ok || call.blocking {
		return
	}
	call.blocking = true
	call.g.blocking.Add(1)
}

// hangingProvider is a nodestatustest.Provider whose Pings, after
// SetPingHang(true), block on purpose until their context ends. It reads
// its setting once per Ping: a Ping that hangs always said so.
type hangingProvider struct {
	*nodestatustest.Provider
	hang atomic.Bool
}

func newHangingProvider(p *nodestatustest.Provider) *hangingProvider {
	return &hangingProvider{Provider: p}
}

// SetPingHang makes later Pings block until their context ends (and return
// its error), or, with false, answer as the Provider does.
func (p *hangingProvider) SetPingHang(hang bool) { p.hang.Store(hang) }

// Ping counts the call in the Provider, and blocks if SetPingHang says so.
func (p *hangingProvider) Ping(ctx context.Context) error {
	if !p.hang.Load() {
		return p.Provider.Ping(ctx)
	}
	blockOnPurpose(ctx)
	_ = p.Provider.Ping(ctx) // counted, and it answers at once
	<-ctx.Done()
	return ctx.Err()
}

// stepWhileBusy steps clk by d once no controller on it has a ping in
// flight that does not block on purpose, without waiting for their other
// work: for a test whose controller holds a job that waits on purpose (for
// a limiter unit the test holds), where idle would wait for ever.
func stepWhileBusy(t *testing.T, clk *testclock.FakeClock, d time.Duration) {
	t.Helper()
	require.Eventually(t, func() bool { return onClock.noPingInFlight(clk) }, waitFor, time.Millisecond, "no ping in flight")
	clk.Step(d)
}

// preemptedProvider is a nodestatustest.Provider whose next Ping, after
// hold, stops inside Ping until release, and then answers at once without
// error: a Ping whose goroutine the scheduler left in the middle, for as
// long as the test likes. It ignores its context while it is stopped, as a
// preempted goroutine does, and does not say it blocks on purpose.
type preemptedProvider struct {
	*nodestatustest.Provider
	held     atomic.Bool
	entered  chan struct{} // closed once the held Ping has begun
	released chan struct{}
	once     sync.Once
}

func newPreemptedProvider(p *nodestatustest.Provider) *preemptedProvider {
	return &preemptedProvider{Provider: p, entered: make(chan struct{}), released: make(chan struct{})}
}

// hold makes the next Ping stop inside Ping until release.
func (p *preemptedProvider) hold() { p.held.Store(true) }

// release lets the held Ping go on; it may be called more than once.
func (p *preemptedProvider) release() { p.once.Do(func() { close(p.released) }) }

func (p *preemptedProvider) Ping(ctx context.Context) error {
	err := p.Provider.Ping(ctx)
	if p.held.Swap(false) {
		close(p.entered)
		<-p.released
	}
	return err
}

// A step helper asked to step 10.5 s, more than PingTimeout, while a Ping
// that answers at once is stopped inside the provider (as a preempted
// goroutine is on a loaded machine) waits until it has returned, and the
// ping succeeds: no step times it out.
func TestStepWaitsForAPingInFlight(t *testing.T) {
	cs := kubefake.NewClientset()
	clk := newFakeClock()
	p := newPreemptedProvider(nodestatustest.NewProvider(testNode("vk-0")))
	h := &hooks{}
	cfg := fakeConfig(cs, clk, p)
	cfg.Metrics = h
	startReady(t, cfg)
	idle(t, clk)
	g := onClock.running(clk)[0].g

	// The next ping, due 10 s after the first, stops inside Ping.
	p.hold()
	step(t, clk, 10500*time.Millisecond)
	recv(t, p.entered, "the next Ping begins")
	before := clk.Now()

	// The Ping is released once the step helper has found the controller
	// quiet but for it three times, each time without stepping. Counted
	// from here: the helpers before may have been held back already, by
	// the first Ping (at start) preempted on a starved machine.
	held := g.heldBack.Load()
	stop := make(chan struct{})
	var movedEarly atomic.Bool
	releaser := make(chan struct{})
	go func() {
		defer close(releaser)
		for g.heldBack.Load() < held+3 {
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
		}
		movedEarly.Store(!clk.Now().Equal(before))
		p.release()
	}()
	step(t, clk, 10500*time.Millisecond)
	p.release() // without the wait, the step came first: let the Ping return
	idle(t, clk)
	close(stop)
	recv(t, releaser, "the releaser returns")

	require.False(t, h.saw(nodestatus.CallPing, nodestatus.OutcomeFailed, 0), "no ping failed (timed out)")
	n, err := cs.CoreV1().Nodes().Get(context.Background(), "vk-0", metav1.GetOptions{})
	require.NoError(t, err)
	ready := condition(n, corev1.NodeReady)
	require.Equal(t, corev1.ConditionTrue, ready.Status, "Ready: %s", ready.Message)
	require.GreaterOrEqual(t, g.heldBack.Load()-held, int64(3), "the step waited for the Ping in flight")
	require.False(t, movedEarly.Load(), "no step while the Ping was in flight")
	require.Equal(t, before.Add(10500*time.Millisecond), clk.Now(), "one step, after the Ping returned")
	require.GreaterOrEqual(t, p.Pings(), 3, "the held ping and the one due 10 s after it")
}
