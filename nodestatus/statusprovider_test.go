package nodestatus_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	testclock "k8s.io/utils/clock/testing"

	"github.com/reconkit/reconkit/nodestatus"
)

// conditionReporter is the interface checkpoint calls its Conditions
// through; a Provider must fit it as it is.
type conditionReporter interface {
	ReportCondition(conditionType, status, reason, message string)
}

var (
	_ conditionReporter       = (*nodestatus.Provider)(nil)
	_ nodestatus.NodeProvider = (*nodestatus.Provider)(nil)
)

// notes records a provider's notifications.
type notes struct {
	mu    sync.Mutex
	nodes []*corev1.Node
}

func (n *notes) cb(node *corev1.Node) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.nodes = append(n.nodes, node)
}

func (n *notes) len() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return len(n.nodes)
}

func (n *notes) last() *corev1.Node {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.nodes[len(n.nodes)-1]
}

func TestProviderCoalescesBursts(t *testing.T) {
	clk := testclock.NewFakeClock(time.Now())
	p := nodestatus.NewProvider(nodestatus.ProviderConfig{Clock: clk})
	var got notes
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p.NotifyNodeStatus(ctx, got.cb)
	require.Equal(t, 0, got.len(), "nothing set, nothing sent")

	p.ReportCondition("ConfigOK", "True", "Loaded", "v1")
	p.SetAddresses(corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "10.0.0.1"})
	p.SetCapacity(corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")}, nil)
	p.SetNodeInfo(corev1.NodeSystemInfo{KubeletVersion: "v1"})
	p.ReportCondition("ConfigOK", "True", "Loaded", "v2")
	require.Equal(t, 0, got.len(), "held for the coalescing wait")
	clk.Step(nodestatus.DefaultCoalesce)
	require.Eventually(t, func() bool { return got.len() == 1 }, waitFor, time.Millisecond, "one notification for the burst")
	n := got.last()
	require.Equal(t, "v2", condition(n, "ConfigOK").Message)
	require.Equal(t, "10.0.0.1", n.Status.Addresses[0].Address)
	require.Equal(t, "4", n.Status.Capacity.Cpu().String())
	require.Equal(t, "v1", n.Status.NodeInfo.KubeletVersion)

	p.ReportCondition("ConfigOK", "True", "Loaded", "v2")
	p.Flush()
	require.Equal(t, 1, got.len(), "setting what is there notifies nothing")

	p.RemoveCondition("ConfigOK")
	p.Flush()
	require.Equal(t, 2, got.len(), "Flush sends at once")
	require.Nil(t, condition(got.last(), "ConfigOK"))

	// A callback registered later gets what was set so far; one whose
	// context ended gets nothing more.
	var late notes
	lctx, lcancel := context.WithCancel(context.Background())
	p.NotifyNodeStatus(lctx, late.cb)
	require.Equal(t, 1, late.len())
	lcancel()
	i := 0
	require.Eventually(t, func() bool {
		// The callback goes once the context's AfterFunc has run.
		before := late.len()
		i++
		p.ReportCondition("X", "True", "", fmt.Sprint(i))
		p.Flush()
		return late.len() == before
	}, waitFor, time.Millisecond, "no notification after the context ended")
	require.Equal(t, fmt.Sprint(i), condition(got.last(), "X").Message, "the other callback still gets them")
}

// A notification goes Coalesce after the first change it carries, not
// after the last: changes that keep coming within Coalesce of each other
// are sent every Coalesce, never held back until they stop.
func TestProviderNotifiesCoalesceAfterFirstChange(t *testing.T) {
	clk := testclock.NewFakeClock(time.Now())
	p := nodestatus.NewProvider(nodestatus.ProviderConfig{Clock: clk})
	var got notes
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p.NotifyNodeStatus(ctx, got.cb)
	for i := range 3 {
		p.ReportCondition("ConfigOK", "True", "Loaded", fmt.Sprint("v", 2*i))
		clk.Step(nodestatus.DefaultCoalesce * 6 / 10)
		p.ReportCondition("ConfigOK", "True", "Loaded", fmt.Sprint("v", 2*i+1))
		clk.Step(nodestatus.DefaultCoalesce * 4 / 10)
		require.Eventually(t, func() bool { return got.len() == i+1 }, waitFor, time.Millisecond,
			"notification %d, %v after its first change, though another came %v later", i+1, nodestatus.DefaultCoalesce, nodestatus.DefaultCoalesce*6/10)
		require.Equal(t, fmt.Sprint("v", 2*i+1), condition(got.last(), "ConfigOK").Message, "everything set so far")
	}
}

func TestProviderTransitionTime(t *testing.T) {
	clk := testclock.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	p := nodestatus.NewProvider(nodestatus.ProviderConfig{Clock: clk, Coalesce: -1})
	var got notes
	p.NotifyNodeStatus(context.Background(), got.cb)

	p.ReportCondition("ConfigOK", "True", "Loaded", "v1")
	require.True(t, condition(got.last(), "ConfigOK").LastTransitionTime.IsZero(), "the first report leaves the time to the controller")
	clk.Step(time.Minute)
	p.ReportCondition("ConfigOK", "False", "Bad", "v2")
	t1 := condition(got.last(), "ConfigOK").LastTransitionTime
	require.Equal(t, clk.Now(), t1.Time, "a status change moves the transition time")
	clk.Step(time.Minute)
	p.ReportCondition("ConfigOK", "False", "StillBad", "v3")
	require.Equal(t, t1, condition(got.last(), "ConfigOK").LastTransitionTime, "a new reason or message does not")
	require.Equal(t, "v3", condition(got.last(), "ConfigOK").Message)
	require.Len(t, got.last().Status.Conditions, 1, "replaced, not added")
}

func TestProviderConcurrentUse(t *testing.T) {
	p := nodestatus.NewProvider(nodestatus.ProviderConfig{Coalesce: time.Millisecond})
	var n atomic.Int64
	ctx, cancel := context.WithCancel(context.Background())
	p.NotifyNodeStatus(ctx, func(*corev1.Node) { n.Add(1) })
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for j := range 100 {
				p.ReportCondition(fmt.Sprintf("C%d", i), "True", "", fmt.Sprint(j))
				p.SetAddresses(corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: fmt.Sprintf("10.0.%d.%d", i, j)})
			}
		})
	}
	wg.Wait()
	p.Flush()
	cancel()
	require.Len(t, p.Node().Status.Conditions, 8)
	for i := range 8 {
		require.Equal(t, "99", condition(p.Node(), corev1.NodeConditionType(fmt.Sprintf("C%d", i))).Message)
	}
	require.Less(t, n.Load(), int64(1600), "bursts are coalesced")
}

// A host's provider: the controller registers Config.Node, and the
// provider's conditions and addresses are laid over it.
func ExampleProvider() {
	clk := testclock.NewFakeClock(time.Now())
	p := nodestatus.NewProvider(nodestatus.ProviderConfig{
		Ping:  func(context.Context) error { return nil },
		Clock: clk,
	})
	p.NotifyNodeStatus(context.Background(), func(n *corev1.Node) {
		for _, c := range n.Status.Conditions {
			fmt.Println("notified:", c.Type, c.Status, c.Reason)
		}
		fmt.Println("addresses:", n.Status.Addresses)
	})
	// Many changes in a burst are one notification, sent when the
	// coalescing wait (DefaultCoalesce) has passed, or now with Flush.
	p.ReportCondition("ConfigOK", "True", "Loaded", "config v7 is active")
	p.SetCondition(corev1.NodeCondition{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "BackendUp"})
	p.SetAddresses(corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "10.0.0.7"})
	p.Flush()
	// Output:
	// notified: ConfigOK True Loaded
	// notified: Ready True BackendUp
	// addresses: [{InternalIP 10.0.0.7}]
}
