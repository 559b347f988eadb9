package nodestatus_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/testr"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	testclock "k8s.io/utils/clock/testing"

	"github.com/reconkit/reconkit/nodestatus"
	"github.com/reconkit/reconkit/nodestatus/nodestatustest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// waitFor bounds every wait for something the test expects to happen. It is
// generous: on a loaded machine a step can take seconds, and a test that
// fails only by timing out here is a test that found a bug.
const waitFor = time.Minute

// testNode is a small virtual node as a provider would describe it.
func testNode(name string) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Labels:      map[string]string{"type": "virtual-kubelet", "kubernetes.io/role": "agent"},
			Annotations: map[string]string{"example.com/provider": "fake"},
		},
		Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: "virtual-kubelet.io/provider", Value: "fake", Effect: corev1.TaintEffectNoSchedule}}},
		Status: corev1.NodeStatus{
			Capacity: corev1.ResourceList{
				corev1.ResourceCPU:    resource.MustParse("20"),
				corev1.ResourceMemory: resource.MustParse("100Gi"),
				corev1.ResourcePods:   resource.MustParse("110"),
			},
			Allocatable: corev1.ResourceList{
				corev1.ResourceCPU:    resource.MustParse("20"),
				corev1.ResourceMemory: resource.MustParse("100Gi"),
				corev1.ResourcePods:   resource.MustParse("110"),
			},
			Conditions: []corev1.NodeCondition{
				{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "ProviderReady"},
				{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse, Reason: "ProviderHasSufficientMemory"},
			},
			Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.1"}},
		},
	}
}

// running is a controller whose Run runs on a goroutine of the test.
type running struct {
	*nodestatus.NodeController
	cancel context.CancelFunc
}

// start runs a controller until the test ends (or stop is called).
func start(t *testing.T, cfg nodestatus.Config) *running {
	t.Helper()
	clk, onFake := cfg.Clock.(*testclock.FakeClock)
	var g *pingGauge
	if onFake {
		g = gaugePings(cfg.Provider)
		cfg.Provider = g
	}
	c, err := nodestatus.New(cfg)
	require.NoError(t, err)
	nodestatus.EnableProbe(c)
	if onFake {
		onClock.add(t, clk, clockUser{c, g})
	}
	ctx, cancel := context.WithCancel(logr.NewContext(context.Background(), testr.NewWithOptions(t, testr.Options{Verbosity: 1})))
	go func() { _ = c.Run(ctx) }()
	r := &running{NodeController: c, cancel: cancel}
	t.Cleanup(func() { r.stop(t) })
	return r
}

// startReady starts a controller (see start) and waits until it is Ready.
func startReady(t *testing.T, cfg nodestatus.Config) *running {
	t.Helper()
	c := start(t, cfg)
	waitReady(t, c)
	return c
}

// stop cancels Run and waits for it, returning its error.
func (r *running) stop(t *testing.T) error {
	t.Helper()
	r.cancel()
	select {
	case <-r.Done():
	case <-time.After(waitFor):
		t.Fatal("Run did not return after cancellation")
	}
	return r.Err()
}

// clockUsers records the controllers started on each fake clock, with
// their providers' ping gauges, so that a test that steps a clock can wait
// until they are quiet (see idle).
type clockUsers struct {
	mu sync.Mutex
	m  map[*testclock.FakeClock][]clockUser
}

// clockUser is a controller on a fake clock and the gauge of its Pings.
type clockUser struct {
	c *nodestatus.NodeController
	g *pingGauge
}

var onClock = &clockUsers{m: map[*testclock.FakeClock][]clockUser{}}

func (u *clockUsers) add(t *testing.T, clk *testclock.FakeClock, cu clockUser) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.m[clk] = append(u.m[clk], cu)
	t.Cleanup(func() {
		u.mu.Lock()
		defer u.mu.Unlock()
		delete(u.m, clk)
	})
}

// running returns the controllers on clk whose Run has not returned.
func (u *clockUsers) running(clk *testclock.FakeClock) []clockUser {
	u.mu.Lock()
	cs := append([]clockUser(nil), u.m[clk]...)
	u.mu.Unlock()
	return slices.DeleteFunc(cs, func(cu clockUser) bool {
		select {
		case <-cu.c.Done():
			return true
		default:
			return false
		}
	})
}

// quiet reports whether every running controller on clk is quiet: nothing
// in flight, nothing due until one of its timers fires, and no ping
// running but one whose provider blocks on purpose (see pingGauge).
func (u *clockUsers) quiet(clk *testclock.FakeClock) bool {
	cs := u.running(clk)
	for _, cu := range cs {
		quiet, pinging, ok := nodestatus.Probe(cu.c, 100*time.Millisecond)
		if !ok || !quiet {
			return false
		}
		if pinging && !cu.g.blocked() {
			cu.g.heldBack.Add(1)
			return false
		}
	}
	return len(cs) > 0
}

// noPingInFlight reports whether no running controller on clk has a ping
// running, but one whose provider blocks on purpose; their other work is
// not asked about.
func (u *clockUsers) noPingInFlight(clk *testclock.FakeClock) bool {
	for _, cu := range u.running(clk) {
		_, pinging, ok := nodestatus.Probe(cu.c, 100*time.Millisecond)
		if !ok || pinging && !cu.g.blocked() {
			return false
		}
	}
	return true
}

// state describes what quiet reports on, for a test's failure message.
func (u *clockUsers) state(clk *testclock.FakeClock) []string {
	var out []string
	for _, cu := range u.running(clk) {
		quiet, pinging, ok := nodestatus.Probe(cu.c, 100*time.Millisecond)
		out = append(out, fmt.Sprintf("%s; answered %v, quiet %v, ping in flight %v, blocking on purpose %v",
			nodestatus.State(cu.c), ok, quiet, pinging, cu.g.blocked()))
	}
	return out
}

// recv receives from ch, failing the test if nothing comes within waitFor.
func recv[T any](t testing.TB, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(waitFor):
		t.Fatalf("%s: nothing within %v", what, waitFor)
		panic("unreachable")
	}
}

func waitReady(t *testing.T, c *running) {
	t.Helper()
	select {
	case <-c.Ready():
	case <-c.Done():
		t.Fatalf("Run returned before Ready: %v", c.Err())
	case <-time.After(waitFor):
		t.Fatalf("not Ready within %v", waitFor)
	}
}

// waitNode waits, up to waitFor, until the Node called name satisfies cond,
// watching it through cs.
func waitNode(t *testing.T, cs kubernetes.Interface, name string, cond func(*corev1.Node) bool, msg string) *corev1.Node {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	n, err := nodestatustest.WaitForNode(ctx, cs, name, cond)
	require.NoError(t, err, msg)
	return n
}

// waitPings waits, up to waitFor, until p has been pinged n times in all.
func waitPings(t *testing.T, p *nodestatustest.Provider, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	_, err := p.WaitForPings(ctx, n)
	require.NoError(t, err)
}

func condition(n *corev1.Node, typ corev1.NodeConditionType) *corev1.NodeCondition {
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == typ {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}
