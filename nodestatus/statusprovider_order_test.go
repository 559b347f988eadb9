package nodestatus_test

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	testclock "k8s.io/utils/clock/testing"

	"github.com/reconkit/reconkit/nodestatus"
)

// A callback keeps the newest node it is sent, as the controller does, so
// a Provider must never send it an older node after a newer one: the
// controller would serve the older status, without the change made in
// between, until the next change.

// gate is a callback that holds its first call until release is closed,
// then records the node it was sent, as every later call does at once: a
// test decides what happens while a delivery is under way.
type gate struct {
	notes
	first   atomic.Bool
	entered chan struct{} // closed when the first call starts
	release chan struct{}
}

func newGate() *gate {
	return &gate{entered: make(chan struct{}), release: make(chan struct{})}
}

func (g *gate) cb(n *corev1.Node) {
	if g.first.CompareAndSwap(false, true) {
		close(g.entered)
		<-g.release
	}
	g.notes.cb(n)
}

func (n *notes) all() []*corev1.Node {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]*corev1.Node(nil), n.nodes...)
}

// requireSentInOrder checks that got, the nodes a callback was sent in the
// order it was sent them, never goes back: in these tests conditions are
// only added, so each node has every condition of the one before. The last
// node must have every condition of want.
func requireSentInOrder(t *testing.T, got []*corev1.Node, want ...corev1.NodeConditionType) {
	t.Helper()
	require.NotEmpty(t, got, "nothing sent")
	for i := 1; i < len(got); i++ {
		for _, c := range got[i-1].Status.Conditions {
			require.NotNil(t, condition(got[i], c.Type),
				"node %d sent lacks condition %s of node %d: an older node was sent after a newer one (sent: %v)", i+1, c.Type, i, sentConditions(got))
		}
	}
	for _, typ := range want {
		require.NotNil(t, condition(got[len(got)-1], typ), "the last node sent lacks condition %s (sent: %v)", typ, sentConditions(got))
	}
}

// sentConditions lists the condition types of every node sent.
func sentConditions(got []*corev1.Node) [][]corev1.NodeConditionType {
	var all [][]corev1.NodeConditionType
	for _, n := range got {
		var types []corev1.NodeConditionType
		for _, c := range n.Status.Conditions {
			types = append(types, c.Type)
		}
		all = append(all, types)
	}
	return all
}

// Two changes made together with Coalesce < 0: the second is made while
// the first one's node is being sent. The callback ends with the second.
func TestProviderOrderConcurrentChanges(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := nodestatus.NewProvider(nodestatus.ProviderConfig{Coalesce: -1})
		g := newGate()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		p.NotifyNodeStatus(ctx, g.cb)

		var wg sync.WaitGroup
		wg.Go(func() { p.ReportCondition("A", "True", "", "") })
		<-g.entered // the node with A is being sent, and held
		p.ReportCondition("B", "True", "", "")
		close(g.release)
		wg.Wait()
		requireSentInOrder(t, g.all(), "A", "B")
	})
}

// hookCtx calls hook the first time its Done method is called.
// NotifyNodeStatus hands its context to context.AfterFunc, which calls
// Done, after it took the node it sends first and before it sends it: the
// hook runs in between.
type hookCtx struct {
	context.Context
	once sync.Once
	hook func()
}

func (c *hookCtx) Done() <-chan struct{} {
	c.once.Do(c.hook)
	return c.Context.Done()
}

// A change made while NotifyNodeStatus registers its callback is sent
// after what was set before, never followed by it.
func TestProviderOrderRegistrationRacesChange(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := nodestatus.NewProvider(nodestatus.ProviderConfig{Coalesce: -1})
		p.ReportCondition("A", "True", "", "")
		var got notes
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		hooked := false
		hctx := &hookCtx{Context: ctx, hook: func() {
			hooked = true
			done := make(chan struct{})
			go func() { // the host, on its own goroutine
				defer close(done)
				p.ReportCondition("B", "True", "", "")
			}()
			<-done
		}}
		p.NotifyNodeStatus(hctx, got.cb)
		require.True(t, hooked, "the change was made while the callback was registered")
		requireSentInOrder(t, got.all(), "A", "B")
	})
}

// A callback may change the Provider: the change is sent to it after the
// node it is handling, with no deadlock, whether the provider sends every
// change at once or on Flush.
func TestProviderOrderReentrantCallback(t *testing.T) {
	for _, tc := range []struct {
		name   string
		cfg    func() nodestatus.ProviderConfig
		change func(p *nodestatus.Provider, typ string)
	}{{
		name: "at once",
		cfg:  func() nodestatus.ProviderConfig { return nodestatus.ProviderConfig{Coalesce: -1} },
		change: func(p *nodestatus.Provider, typ string) {
			p.ReportCondition(typ, "True", "", "")
		},
	}, {
		name: "flushed",
		cfg: func() nodestatus.ProviderConfig {
			return nodestatus.ProviderConfig{Clock: testclock.NewFakeClock(time.Now())}
		},
		change: func(p *nodestatus.Provider, typ string) {
			p.ReportCondition(typ, "True", "", "")
			p.Flush()
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			p := nodestatus.NewProvider(tc.cfg())
			var got notes
			var calls atomic.Int32
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			p.NotifyNodeStatus(ctx, func(n *corev1.Node) {
				if calls.Add(1) == 1 {
					// Handling the first node changes the provider,
					// then keeps the node it was sent.
					tc.change(p, "B")
				}
				got.cb(n)
			})
			done := make(chan struct{})
			go func() {
				defer close(done)
				tc.change(p, "A")
			}()
			select {
			case <-done:
			case <-time.After(waitFor):
				t.Fatal("a callback that changes the provider deadlocks")
			}
			requireSentInOrder(t, got.all(), "A", "B")
		})
	}
}

// The coalescing timer fires while Flush is sending an earlier node: the
// callback ends with the newer one.
func TestProviderOrderTimerDuringFlush(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := testclock.NewFakeClock(time.Now())
		p := nodestatus.NewProvider(nodestatus.ProviderConfig{Clock: clk})
		g := newGate()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		p.NotifyNodeStatus(ctx, g.cb)

		p.ReportCondition("A", "True", "", "")
		var wg sync.WaitGroup
		wg.Go(p.Flush)
		<-g.entered // Flush is sending the node with A, held
		p.ReportCondition("B", "True", "", "")
		clk.Step(nodestatus.DefaultCoalesce) // B's notification is due
		close(g.release)
		wg.Wait()
		requireSentInOrder(t, g.all(), "A", "B")
		require.False(t, clk.HasWaiters(), "nothing left pending")
	})
}

// Many goroutines change the provider at once: each callback is called
// once at a time, is sent the changes in order, and ends with the last.
func TestProviderOrderUnderLoad(t *testing.T) {
	const writers, changes = 4, 50
	p := nodestatus.NewProvider(nodestatus.ProviderConfig{Coalesce: -1})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type seen struct {
		inCall  atomic.Int32
		overlap atomic.Bool
		last    atomic.Int64
		back    atomic.Bool
	}
	var cbs [2]seen
	for i := range cbs {
		s := &cbs[i]
		p.NotifyNodeStatus(ctx, func(n *corev1.Node) {
			if s.inCall.Add(1) > 1 {
				s.overlap.Store(true)
			}
			defer s.inCall.Add(-1)
			seq, _ := strconv.ParseInt(n.Annotations["seq"], 10, 64)
			if seq <= s.last.Load() {
				s.back.Store(true)
			}
			s.last.Store(seq)
		})
	}
	var wg sync.WaitGroup
	for range writers {
		wg.Go(func() {
			for range changes {
				p.Update(func(n *corev1.Node) {
					seq, _ := strconv.Atoi(n.Annotations["seq"])
					if n.Annotations == nil {
						n.Annotations = map[string]string{}
					}
					n.Annotations["seq"] = strconv.Itoa(seq + 1)
				})
			}
		})
	}
	wg.Wait()
	for i := range cbs {
		require.False(t, cbs[i].overlap.Load(), "callback %d was called again before its call returned", i)
		require.False(t, cbs[i].back.Load(), "callback %d was sent a node no newer than the one before", i)
		require.Equal(t, int64(writers*changes), cbs[i].last.Load(), "callback %d ends with the last change", i)
	}
}
