package etcdfault

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/reconkit/reconkit/internal/testenv"
)

// Step is how far Group.Run moves the fake clock at a time, and StepPause
// the real pause after each step that lets the loops the step woke send.
// A request that a loaded machine sends late is stamped later, by a step
// or two.
const (
	Step      = 250 * time.Millisecond
	StepPause = 20 * time.Millisecond
)

// Group is the agents of one budget test, all on one fake clock: each
// agent is built by Group.New, armed together by Run, and disarmed when
// the test ends, before the cleanups registered ahead of NewGroup (the
// test's cancel and wait) run, so that the loops can stop cleanly.
type Group struct {
	clk *testingclock.FakeClock

	mu     sync.Mutex
	agents []*Agent
}

// NewGroup returns an empty group on clk. Register the cleanups that stop
// the test's loops before calling it: the group's own cleanup, which
// disarms the agents, runs first.
func NewGroup(t *testing.T, clk *testingclock.FakeClock) *Group {
	g := &Group{clk: clk}
	t.Cleanup(func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		for _, a := range g.agents {
			a.Disarm()
		}
	})
	return g
}

// New builds one agent of the group and its client (see the function New).
func (g *Group) New(t *testing.T, srv *testenv.EtcdCluster, ans Answer, maxUnaryRetries uint, c Classify) (*Agent, *clientv3.Client) {
	t.Helper()
	a, cli := New(t, srv, g.clk, ans, maxUnaryRetries, c)
	g.mu.Lock()
	g.agents = append(g.agents, a)
	g.mu.Unlock()
	return a, cli
}

// Run arms every agent of the group at one instant and steps the fake
// clock Step at a time until d has passed or ctx ends, pausing StepPause
// of real time after each step.
func (g *Group) Run(ctx context.Context, d time.Duration) {
	g.mu.Lock()
	agents := append([]*Agent(nil), g.agents...)
	g.mu.Unlock()
	for _, a := range agents {
		a.Arm()
	}
	for range int(d / Step) {
		g.clk.Step(Step)
		select {
		case <-time.After(StepPause):
		case <-ctx.Done():
			return
		}
	}
}

// Instants returns the instants of reqs, in order sent: two agents whose
// instants are equal retry in lockstep (no jitter).
func Instants(reqs []Request) []time.Duration {
	out := make([]time.Duration, 0, len(reqs))
	for _, r := range reqs {
		out = append(out, r.At)
	}
	return out
}

// PerKind counts reqs by their name.
func PerKind(reqs []Request) map[string]int {
	out := map[string]int{}
	for _, r := range reqs {
		out[r.Kind]++
	}
	return out
}

// Rates renders counts (PerKind's) as requests per second over d, sorted
// by name: "records 0.35/s, status 0.20/s".
func Rates(counts map[string]int, d time.Duration) string {
	lines := make([]string, 0, len(counts))
	for kind, n := range counts {
		lines = append(lines, fmt.Sprintf("%s %.2f/s", kind, float64(n)/d.Seconds()))
	}
	sort.Strings(lines)
	return strings.Join(lines, ", ")
}
