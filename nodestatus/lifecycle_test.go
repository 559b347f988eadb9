package nodestatus_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sync/semaphore"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/reconkit/reconkit/internal/testenv"
	"github.com/reconkit/reconkit/nodestatus"
	"github.com/reconkit/reconkit/nodestatus/nodestatustest"
)

// The taints the node lifecycle controller puts on a node it lost.
var lifecycleTaints = map[string]bool{corev1.TaintNodeUnreachable: true, corev1.TaintNodeNotReady: true}

// nodeHistory records, from a watch, whether a node that was once Ready
// and untainted ever stopped being so.
type nodeHistory struct {
	mu      sync.Mutex
	healthy map[string]bool     // seen Ready=True without lifecycle taints
	broken  map[string][]string // what was seen after that
}

func healthy(n *corev1.Node) (bool, string) {
	for _, tn := range n.Spec.Taints {
		if lifecycleTaints[tn.Key] {
			return false, fmt.Sprintf("taint %s:%s", tn.Key, tn.Effect)
		}
	}
	if s := condStatus(n, corev1.NodeReady); s != corev1.ConditionTrue {
		return false, "Ready=" + string(s)
	}
	return true, ""
}

// watchNodes records every node's health until the test ends.
func watchNodes(t *testing.T, admin kubernetes.Interface) *nodeHistory {
	h := &nodeHistory{healthy: map[string]bool{}, broken: map[string][]string{}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	t.Cleanup(func() {
		cancel()
		recv(t, done, "the watch of Nodes ends")
	})
	go func() {
		defer close(done)
		rv := ""
		for ctx.Err() == nil {
			w, err := admin.CoreV1().Nodes().Watch(ctx, metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true})
			if err != nil {
				rv = "" // the server restarted or the version expired: start over
				select {
				case <-ctx.Done():
				case <-time.After(100 * time.Millisecond):
				}
				continue
			}
			for ev := range w.ResultChan() {
				n, ok := ev.Object.(*corev1.Node)
				if !ok || ev.Type == watch.Error {
					rv = ""
					continue
				}
				rv = n.ResourceVersion
				if ev.Type == watch.Bookmark || ev.Type == watch.Deleted {
					continue
				}
				ok, why := healthy(n)
				h.mu.Lock()
				if ok {
					h.healthy[n.Name] = true
				} else if h.healthy[n.Name] {
					h.broken[n.Name] = append(h.broken[n.Name], why)
				}
				h.mu.Unlock()
			}
			w.Stop()
		}
	}()
	return h
}

func (h *nodeHistory) check(t *testing.T, names ...string) {
	t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, n := range names {
		require.True(t, h.healthy[n], "%s was never seen Ready", n)
		require.Empty(t, h.broken[n], "%s stopped being Ready and untainted", n)
	}
}

// forget drops what was seen of names so far: later checks judge only
// what happens from now on.
func (h *nodeHistory) forget(names ...string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, n := range names {
		delete(h.broken, n)
	}
}

// renewedPast waits until every named lease was renewed at or after t0.
func renewedPast(t *testing.T, admin kubernetes.Interface, t0 time.Time, names ...string) {
	t.Helper()
	for _, name := range names {
		require.Eventually(t, func() bool {
			l, err := admin.CoordinationV1().Leases("kube-node-lease").Get(context.Background(), name, metav1.GetOptions{})
			return err == nil && l.Spec.RenewTime != nil && !l.Spec.RenewTime.Time.Before(t0)
		}, time.Until(t0)+waitFor, 100*time.Millisecond, name+" renewed")
	}
}

// TestNodeLifecycleController runs the controllers next to the real node
// lifecycle controller of kube-controller-manager v1.37.1, on real time,
// with a 15s grace period: nodes stay Ready through renewal jitter, a status
// burst and an apiserver restart, a node whose agent dies or is cut off is
// marked Unknown and tainted, and a node whose partition heals is Ready and
// untainted again without waiting for a status report. None of this depends
// on the grace period's length, only on the timings New accepts for it: a
// short one keeps the test short.
func TestNodeLifecycleController(t *testing.T) {
	t.Parallel() // real time, mostly waiting: next to the other real-server tests
	const grace, renew = 15 * time.Second, 3 * time.Second
	a, admin := lifecycleEnv(t, grace)
	ctx := context.Background()
	hist := watchNodes(t, admin)

	// Status traffic shares one throttled client and a limiter of two
	// (the cut-off node's hung attempts included), the leases have their
	// own client: a status burst must not delay the heartbeat.
	statusCfg := a.Config()
	statusCfg.QPS, statusCfg.Burst = 2, 4
	statusClient, err := kubernetes.NewForConfig(statusCfg)
	require.NoError(t, err)
	leaseClient, err := kubernetes.NewForConfig(a.Config())
	require.NoError(t, err)
	limiter := semaphore.NewWeighted(2)
	config := func(name string, p nodestatus.NodeProvider) nodestatus.Config {
		return nodestatus.Config{
			Client: statusClient, LeaseClient: leaseClient, Node: testNode(name), Provider: p, Limiter: limiter,
			LeaseDuration: grace, RenewInterval: renew, RequestTimeout: 4 * time.Second,
			NodeMonitorGracePeriod: grace, PingInterval: 2 * time.Second,
			// Far beyond the test's deadlines: recovery must not wait
			// for a report.
			StatusReportInterval: time.Hour,
		}
	}
	steady := []string{"lc-0", "lc-1", "lc-2"}
	providers := map[string]*nodestatustest.Provider{}
	for _, name := range steady {
		providers[name] = nodestatustest.NewProvider(testNode(name))
		waitReady(t, start(t, config(name, providers[name])))
	}
	dies := start(t, config("lc-dies", nil))
	waitReady(t, dies)
	px := testenv.Proxy(t, a.Addr())
	cutCfg := config("lc-cut", nil)
	cutCfg.Client, err = kubernetes.NewForConfig(a.ConfigFor(px.Addr()))
	require.NoError(t, err)
	cutCfg.LeaseClient = cutCfg.Client
	waitReady(t, start(t, cutCfg))
	all := append(append([]string(nil), steady...), "lc-dies", "lc-cut")

	t.Run("ReadyThroughJitterAndStatusBurst", func(t *testing.T) {
		// A grace period of renewals, counted on the server, with a
		// status burst on the shared, throttled client in it; the
		// subtests after this one watch for more than another.
		t0 := time.Now()
		for _, name := range steady {
			go func() {
				for i := range 100 {
					providers[name].UpdateStatus(func(n *corev1.Node) { n.Labels["burst"] = fmt.Sprint(i) })
				}
			}()
		}
		for _, name := range steady {
			eventually(t, nil, func() bool { return e2node(t, admin, name).Labels["burst"] == "99" }, name+" burst written")
		}
		renewedPast(t, admin, t0.Add(grace), all...)
		hist.check(t, all...)
	})

	t.Run("ReadyThroughAPIServerRestart", func(t *testing.T) {
		rctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
		defer cancel()
		began := time.Now()
		require.NoError(t, a.Restart(rctx))
		down := time.Since(began)
		// The controller judges leases on its own clock, from when it last
		// saw them change: an outage longer than the grace period less a
		// renew interval and a monitor period marks nodes Unknown in any
		// cluster, whatever the nodes do. On a machine that slow the
		// promise left to check is that every node recovers by itself.
		t.Logf("the apiserver was down %v", down.Round(100*time.Millisecond))
		if down < grace-renew-time.Second {
			renewedPast(t, admin, time.Now().Add(grace), all...)
			hist.check(t, all...)
			return
		}
		t.Logf("the apiserver was down %v, too long to stay Ready through (grace period %v): checking that every node recovers", down.Round(100*time.Millisecond), grace)
		for _, name := range all {
			eventually(t, nil, func() bool { ok, _ := healthy(e2node(t, admin, name)); return ok }, name+" Ready and untainted after the restart")
		}
		// What the outage caused is over once every node renewed for a
		// grace period after recovering; from then on they stay Ready.
		renewedPast(t, admin, time.Now().Add(grace), all...)
		hist.forget(all...)
	})

	t.Run("DeadOrCutOffNodeIsMarkedThenRecovers", func(t *testing.T) {
		require.NoError(t, dies.stop(t), "Run returns nil when its context ends")
		px.Cut()
		lost := func(name string) func() bool {
			return func() bool {
				n := e2node(t, admin, name)
				taints := map[corev1.TaintEffect]bool{}
				for _, tn := range n.Spec.Taints {
					if tn.Key == corev1.TaintNodeUnreachable {
						taints[tn.Effect] = true
					}
				}
				return condStatus(n, corev1.NodeReady) == corev1.ConditionUnknown && taints[corev1.TaintEffectNoSchedule] && taints[corev1.TaintEffectNoExecute]
			}
		}
		eventually(t, nil, lost("lc-dies"), "the dead node is Unknown and tainted unreachable")
		eventually(t, nil, lost("lc-cut"), "the cut-off node is Unknown and tainted unreachable")
		n := e2node(t, admin, "lc-cut")
		require.Equal(t, corev1.ConditionUnknown, condStatus(n, corev1.NodeDiskPressure), "the lifecycle controller sets every condition Unknown")

		px.Restore()
		healed := time.Now()
		eventually(t, nil, func() bool {
			n := e2node(t, admin, "lc-cut")
			ok, _ := healthy(n)
			return ok && condStatus(n, corev1.NodeDiskPressure) == corev1.ConditionFalse && condStatus(n, corev1.NodePIDPressure) == corev1.ConditionFalse
		}, "the healed node is Ready, untainted, and no condition stays Unknown")
		t.Logf("Ready and untainted %v after the partition healed (renew interval %v, retry wait at most 5s, monitor period 1s)", time.Since(healed).Round(100*time.Millisecond), renew)
		hist.check(t, steady...)
	})
}

// lifecycleEnv starts an API server and the node lifecycle controller of
// kube-controller-manager with the given grace period and a monitor period
// of 1s, and returns the server and an admin client.
func lifecycleEnv(t *testing.T, grace time.Duration) (*testenv.APIServerInstance, kubernetes.Interface) {
	t.Helper()
	a := testenv.APIServer(t)
	testenv.ControllerManager(t, a,
		"--node-monitor-grace-period="+grace.String(),
		"--node-monitor-period=1s",
		"--node-startup-grace-period="+grace.String(),
	)
	admin, err := kubernetes.NewForConfig(a.Config())
	require.NoError(t, err)
	eventually(t, nil, func() bool {
		_, err := admin.CoreV1().Namespaces().Get(context.Background(), "kube-node-lease", metav1.GetOptions{})
		return err == nil
	}, "kube-node-lease namespace")
	return a, admin
}

// untaintedReadyWithin waits until the Node is Ready=True, and fails if
// that takes past deadline; then until the node lifecycle controller has
// lifted its taints.
func untaintedReadyWithin(t *testing.T, admin kubernetes.Interface, name string, deadline time.Time) {
	t.Helper()
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	_, err := nodestatustest.WaitForNode(ctx, admin, name, readyTrue)
	require.NoError(t, err, "%s Ready=True by the deadline", name)
	waitNode(t, admin, name, func(n *corev1.Node) bool { ok, _ := healthy(n); return ok }, name+" untainted")
}

// TestNodeLifecycleControllerRecovery runs controllers with default
// settings next to the real node lifecycle controller (20s grace period)
// and checks that Ready is back within one renew interval of the heal:
// when heartbeats resume after PingFailureStopHeartbeat stopped them long
// enough for the Node to be marked Unknown and tainted, and when an
// Unknown is written just after the read that follows failed renewals.
func TestNodeLifecycleControllerRecovery(t *testing.T) {
	t.Parallel() // real time, mostly waiting: next to the other real-server tests
	// Well above the default renew interval (10s plus 4% jitter), as the
	// default of 50s is: steady renewals never let the Node go Unknown.
	const grace = 20 * time.Second
	a, admin := lifecycleEnv(t, grace)

	// Two nodes of their own: the cases wait side by side.
	t.Run("ResumedHeartbeats", func(t *testing.T) {
		t.Parallel()
		p := nodestatustest.NewProvider(testNode("rh-ping"))
		cfg := nodestatus.Config{Client: admin, Node: testNode("rh-ping"), Provider: p, PingFailure: nodestatus.PingFailureStopHeartbeat}
		waitReady(t, start(t, cfg))
		waitNode(t, admin, "rh-ping", func(n *corev1.Node) bool { ok, _ := healthy(n); return ok }, "Ready and untainted")
		p.SetPingError(errors.New("backend down"))
		ctx, cancel := context.WithTimeout(context.Background(), 2*grace+waitFor)
		defer cancel()
		_, err := nodestatustest.WaitForNode(ctx, admin, "rh-ping", func(n *corev1.Node) bool {
			return condStatus(n, corev1.NodeReady) == corev1.ConditionUnknown && slices.ContainsFunc(n.Spec.Taints, func(tn corev1.Taint) bool {
				return tn.Key == corev1.TaintNodeUnreachable
			})
		})
		require.NoError(t, err, "marked Unknown and tainted while heartbeats are stopped")
		// Counted once the error is cleared: a Ping called between a count
		// read before and the clearing fails, and would pass for the first
		// that can succeed, which comes a PingInterval later.
		p.SetPingError(nil)
		pings := p.Pings()
		waitPings(t, p, pings+1)
		healed := time.Now() // the first ping that can succeed has been called
		untaintedReadyWithin(t, admin, "rh-ping", healed.Add(nodestatus.DefaultLeaseDuration/4))
		t.Logf("Ready %v after heartbeats resumed", time.Since(healed).Round(100*time.Millisecond))
	})

	t.Run("UnknownJustAfterRecoveryRead", func(t *testing.T) {
		t.Parallel()
		var failing atomic.Bool
		leaseCfg := a.Config()
		leaseCfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
			return roundTripFunc(func(req *http.Request) (*http.Response, error) {
				if failing.Load() && req.Method == http.MethodPut && strings.Contains(req.URL.Path, "/leases/") {
					return &http.Response{StatusCode: http.StatusServiceUnavailable, Status: "503 Service Unavailable",
						Header: http.Header{}, Body: io.NopCloser(strings.NewReader("")), Request: req}, nil
				}
				return rt.RoundTrip(req)
			})
		}
		leaseClient, err := kubernetes.NewForConfig(leaseCfg)
		require.NoError(t, err)
		client := readsOf(admin)
		rec := &recorder{}
		cfg := nodestatus.Config{Client: client, LeaseClient: leaseClient, Node: testNode("rh-late"), Metrics: rec}
		waitReady(t, start(t, cfg))
		waitNode(t, admin, "rh-late", func(n *corev1.Node) bool { ok, _ := healthy(n); return ok }, "Ready and untainted")

		failing.Store(true)
		eventually(t, nil, func() bool { return rec.count(nodestatus.CallUpdateLease, nodestatus.OutcomeTransient) >= 2 }, "renewals fail")
		injected := make(chan error, 1)
		client.afterNextRead(func(got *corev1.Node) {
			if !readyTrue(got) {
				injected <- fmt.Errorf("the recovery read saw Ready=%s already", condStatus(got, corev1.NodeReady))
				return
			}
			injected <- markUnknownErr(admin, "rh-late")
		})
		failing.Store(false)
		healed := time.Now()
		select {
		case err := <-injected:
			require.NoError(t, err, "Unknown written just after the recovery read")
		case <-time.After(waitFor):
			t.Fatal("no recovery read")
		}
		untaintedReadyWithin(t, admin, "rh-late", healed.Add(nodestatus.DefaultLeaseDuration/4))
		t.Logf("Ready %v after the heal", time.Since(healed).Round(100*time.Millisecond))
	})
}

func e2node(t *testing.T, admin kubernetes.Interface, name string) *corev1.Node {
	t.Helper()
	n, err := admin.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	require.NoError(t, err)
	return n
}
