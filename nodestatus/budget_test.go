package nodestatus_test

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/watch"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/clock"

	"github.com/reconkit/reconkit/kubefake"
	"github.com/reconkit/reconkit/nodestatus/nodestatustest"
)

// requestLog records the instant, on a test's clock, of every request one
// client sends, watches included.
type requestLog struct {
	clk clock.PassiveClock
	mu  sync.Mutex
	at  []time.Time
}

func logRequests(cl *kubefake.Client, clk clock.PassiveClock) *requestLog {
	l := &requestLog{clk: clk}
	cl.PrependReactor("*", "*", func(k8stesting.Action) (bool, runtime.Object, error) {
		l.add()
		return false, nil, nil
	})
	cl.PrependWatchReactor("*", func(k8stesting.Action) (bool, watch.Interface, error) {
		l.add()
		return false, nil, nil
	})
	return l
}

func (l *requestLog) add() {
	now := l.clk.Now()
	l.mu.Lock()
	l.at = append(l.at, now)
	l.mu.Unlock()
}

// within returns the instants of the requests sent in [from, to), as
// offsets from from.
func (l *requestLog) within(from, to time.Time) []time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []time.Duration
	for _, t := range l.at {
		if !t.Before(from) && t.Before(to) {
			out = append(out, t.Sub(from))
		}
	}
	return out
}

// busiest returns the most requests in any window of length w among
// the offsets, which are sorted.
func busiest(at []time.Duration, w time.Duration) int {
	most := 0
	for i := range at {
		j := i
		for j < len(at) && at[j]-at[i] < w {
			j++
		}
		most = max(most, j-i)
	}
	return most
}

// writes matches the requests that write: create, update, patch.
func writes(a k8stesting.Action) bool {
	switch a.GetVerb() {
	case "create", "update", "patch":
		return true
	}
	return false
}

// budgetUnderShort names the answers TestRequestBudgetUnderPersistentAnswers
// gives under -short: one for each way a loop meets a persistent answer
// (retry after a wait, read again, create again, the server's Retry-After,
// a dead connection). The full run gives every answer.
var budgetUnderShort = map[string]bool{
	"410 Gone": true,
	"404 on status patches and leases, the Node there": true,
	"409 Conflict on every write":                      true,
	"429 with Retry-After 1":                           true,
	"connection refused":                               true,
}

// TestRequestBudgetUnderPersistentAnswers holds the request budget of
// both loops of the controller, lease renewal (with its re-reads and the
// lease's re-creation) and status writes (with registration and
// re-reads): once the API server has given the same answer to every
// request for 30 s, each loop of a node sends at most one request per
// second, in every 10 s window from 30 s to 90 s (60 s under -short), and
// its waits are jittered, so nodes that failed together do not retry
// together. Each
// loop has a client of its own (Config.LeaseClient), whose requests are
// counted. Two nodes run in lockstep (no renew jitter, same start) on one
// fake server; the adversary answers from the moment both are Ready, and
// a status change makes the status loop write into it too. Each case runs
// in a synctest bubble, whose time moves on only while both controllers
// are blocked, straight to the next timer due: each request is counted at
// the instant its wait ends, never a step late.
func TestRequestBudgetUnderPersistentAnswers(t *testing.T) {
	nodes := schema.GroupResource{Resource: "nodes"}
	every := func(a kubefake.Answer) func(*kubefake.Server, []*kubefake.Client) {
		return func(s *kubefake.Server, _ []*kubefake.Client) { s.Inject(kubefake.Fault{Answer: a}) }
	}
	onWrites := func(a kubefake.Answer) func(*kubefake.Server, []*kubefake.Client) {
		return func(s *kubefake.Server, _ []*kubefake.Client) { s.Inject(kubefake.Fault{Match: writes, Answer: a}) }
	}
	for _, tc := range []struct {
		name  string
		fault func(*kubefake.Server, []*kubefake.Client)
		// most is the bound on each loop's requests in 10 s, when
		// tighter than the budget's 10.
		most int
	}{
		{"410 Gone", every(kubefake.Fail(apierrors.NewResourceExpired("too old resource version"))), 0},
		{"403 Forbidden", every(kubefake.Fail(apierrors.NewForbidden(nodes, "vk", errors.New("RBAC: access denied")))), 0},
		{"404 Not Found", every(func(a k8stesting.Action) error {
			return apierrors.NewNotFound(a.GetResource().GroupResource(), "vk")
		}), 0},
		// The lease, found missing and not created, is created again
		// without reading it first: two requests per retry wait.
		{"404 on status patches and leases, the Node there", func(s *kubefake.Server, _ []*kubefake.Client) {
			s.Inject(kubefake.Fault{Resource: "leases", Answer: func(a k8stesting.Action) error {
				return apierrors.NewNotFound(a.GetResource().GroupResource(), "vk")
			}})
			s.Inject(kubefake.Fault{Verb: "patch", Resource: "nodes", Answer: func(a k8stesting.Action) error {
				return apierrors.NewNotFound(nodes, "vk")
			}})
		}, 7},
		// A write refused with 409 is read again at once, but a copy
		// read just now is not: at most two requests per retry wait
		// (at least 3.3 s), not four.
		{"409 Conflict on every write", onWrites(kubefake.Conflict()), 7},
		{"422 Invalid on every write", onWrites(kubefake.Fail(apierrors.NewInvalid(schema.GroupKind{Kind: "Node"}, "vk",
			field.ErrorList{field.Invalid(field.NewPath("metadata", "labels"), "x", "invalid")}))), 0},
		{"429 with Retry-After 0", every(kubefake.TooManyRequests(0)), 0},
		{"429 with Retry-After 1", every(kubefake.TooManyRequests(1)), 0},
		{"500 Internal Error", every(kubefake.InternalError()), 0},
		{"503 Unavailable", every(kubefake.Unavailable()), 0},
		{"500 ServerTimeout with Retry-After 0", every(kubefake.ServerTimeout(0)), 0},
		{"504 Timeout", every(kubefake.Timeout()), 0},
		{"connection refused", func(_ *kubefake.Server, cls []*kubefake.Client) {
			for _, c := range cls {
				c.Cut()
			}
		}, 0},
		{"connection reset", every(kubefake.ConnectionReset()), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if testing.Short() && !budgetUnderShort[tc.name] {
				t.Skip("another answer of the same kind runs under -short; the full run tries every answer")
			}
			synctest.Test(t, func(t *testing.T) { budgetUnder(t, tc.fault, tc.most) })
		})
	}
}

// budgetUnder runs TestRequestBudgetUnderPersistentAnswers' case whose
// adversary fault installs, in a synctest bubble: time passes only while
// both controllers are blocked, straight to the next timer due.
func budgetUnder(t *testing.T, fault func(*kubefake.Server, []*kubefake.Client), tight int) {
	clk := clock.RealClock{}
	srv := kubefake.Config{Clock: clk}.NewServer()
	var (
		clients  []*kubefake.Client
		provs    []*nodestatustest.Provider
		ctrls    []*running
		statuses []*requestLog // the status loop's requests, by node
		leases   []*requestLog // the lease loop's
	)
	for i := range 2 {
		cl, lcl := srv.NewClient(), srv.NewClient()
		// Logged before they are used.
		statuses, leases = append(statuses, logRequests(cl, clk)), append(leases, logRequests(lcl, clk))
		p := nodestatustest.NewProvider(testNode(fmt.Sprintf("vk-%d", i)))
		cfg := bubbleConfig(cl.Clientset, p)
		cfg.LeaseClient = lcl.Clientset
		cfg.Node = testNode(fmt.Sprintf("vk-%d", i))
		cfg.RenewJitter, cfg.ReRegister = -1, true
		ctrls = append(ctrls, start(t, cfg))
		clients, provs = append(clients, cl, lcl), append(provs, p)
	}
	for _, c := range ctrls {
		waitReady(t, c)
	}
	synctest.Wait()
	t0 := clk.Now()
	fault(srv, clients)
	for _, p := range provs {
		p.UpdateStatus(func(n *corev1.Node) { n.Labels["changed"] = "yes" })
	}
	// Under -short the count stops at 60 s: three windows of
	// 10 s past the first 30 s, a third fewer steps.
	end := 90 * time.Second
	if testing.Short() {
		end = 60 * time.Second
	}
	pass(end)
	var seen [][]time.Duration
	for i := range ctrls {
		var node []time.Duration
		for _, loop := range []struct {
			name string
			log  *requestLog
		}{{"status", statuses[i]}, {"lease", leases[i]}} {
			all := loop.log.within(t0, t0.Add(end))
			late := loop.log.within(t0.Add(30*time.Second), t0.Add(end))
			secs := (end - 30*time.Second).Seconds()
			most := busiest(late, 10*time.Second)
			t.Logf("vk-%d %s loop: %d requests in the first 30 s, %d from 30 s to %v (%.2f/s), at most %d in 10 s", i, loop.name, len(all)-len(late), len(late), end, float64(len(late))/secs, most)
			bound := 10
			if tight > 0 {
				bound = tight
			}
			require.LessOrEqual(t, most, bound, "vk-%d %s loop: requests in 10 s, 30 s into the fault", i, loop.name)
			node = append(node, late...)
		}
		slices.Sort(node)
		t.Logf("vk-%d, both loops: %.2f requests/s from 30 s to %v", i, float64(len(node))/(end-30*time.Second).Seconds(), end)
		require.NotEmpty(t, node, "vk-%d: the adversary was reached", i)
		seen = append(seen, node)
	}
	if len(seen[0]) > 2 && len(seen[1]) > 2 {
		require.False(t, slices.Equal(seen[0], seen[1]), "two nodes that failed together retry at the same instants: no jitter")
	}
}

// TestRequestsAfterAPIServerRestart holds what a node costs an API server
// that restarts: its connections are refused for 20 s, then it answers 503
// for 10 s while it starts, then serves again. Over the minute after it
// serves again, a node sends no more than its steady state (6 lease
// renewals a minute) plus one recovery: a read of the Node and one status
// patch, as the kubelet's node status loop does after an outage, and its
// first request comes within 5 s.
func TestRequestsAfterAPIServerRestart(t *testing.T) {
	synctest.Test(t, requestsAfterRestart)
}

// requestsAfterRestart is TestRequestsAfterAPIServerRestart in a synctest
// bubble: time passes only while both controllers are blocked.
func requestsAfterRestart(t *testing.T) {
	clk := clock.RealClock{}
	srv := kubefake.Config{Clock: clk}.NewServer()
	var clients []*kubefake.Client
	var logs []*requestLog
	var ctrls []*running
	for i := range 2 {
		cl := srv.NewClient()
		cfg := bubbleConfig(cl.Clientset, nil)
		cfg.Node = testNode(fmt.Sprintf("vk-%d", i))
		logs = append(logs, logRequests(cl, clk)) // before it is used
		ctrls = append(ctrls, start(t, cfg))
		clients = append(clients, cl)
	}
	for _, c := range ctrls {
		waitReady(t, c)
	}
	synctest.Wait()
	t0 := clk.Now()
	for _, c := range clients {
		c.Cut()
	}
	srv.EndWatches()
	pass(20 * time.Second)
	for _, c := range clients {
		c.Heal()
	}
	srv.Inject(kubefake.Fault{Answer: kubefake.Unavailable()})
	pass(10 * time.Second)
	srv.ClearFaults()
	up := clk.Now()
	pass(time.Minute)
	for i, l := range logs {
		down := l.within(t0, up)
		after := l.within(up, up.Add(time.Minute))
		t.Logf("vk-%d: %d requests while the apiserver was down (30 s), %d in the minute after", i, len(down), len(after))
		require.LessOrEqual(t, len(down), 20, "vk-%d: requests while down", i)
		require.NotEmpty(t, after, "vk-%d: recovered", i)
		require.LessOrEqual(t, after[0], 5*time.Second, "vk-%d: first request after the restart", i)
		require.LessOrEqual(t, len(after), 6+1+2, "vk-%d: requests in the minute after the restart", i)
	}
}
