package nodestatus_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	testclock "k8s.io/utils/clock/testing"

	"github.com/reconkit/reconkit/kubefake"
	"github.com/reconkit/reconkit/nodestatus"
	"github.com/reconkit/reconkit/nodestatus/nodestatustest"
)

// verbs counts the fake clientset's requests by "verb resource[/sub]".
type verbs struct {
	mu sync.Mutex
	n  map[string]int
}

func countVerbs(cs *fake.Clientset) *verbs {
	v := &verbs{n: map[string]int{}}
	cs.PrependReactor("*", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		key := a.GetVerb() + " " + a.GetResource().Resource
		if s := a.GetSubresource(); s != "" {
			key += "/" + s
		}
		v.mu.Lock()
		v.n[key]++
		v.mu.Unlock()
		return false, nil, nil
	})
	return v
}

func (v *verbs) get(key string) int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.n[key]
}

func fakeConfig(cs *fake.Clientset, clk *testclock.FakeClock, p nodestatus.NodeProvider) nodestatus.Config {
	return nodestatus.Config{Client: cs, Node: testNode("vk-0"), Provider: p, Clock: clk}
}

// newFakeClock is the fake clock tests on the fake clientset start from.
func newFakeClock() *testclock.FakeClock {
	return testclock.NewFakeClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
}

// leaseFaults makes a fake clientset's lease updates fail with err while it
// is set, and counts them.
type leaseFaults struct {
	mu       sync.Mutex
	err      error
	attempts int
}

func failLeaseUpdates(cs *fake.Clientset) *leaseFaults {
	f := &leaseFaults{}
	cs.PrependReactor("update", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.attempts++
		if f.err != nil {
			return true, nil, f.err
		}
		return false, nil, nil
	})
	return f
}

// set makes the updates from now fail with err, or succeed when nil.
func (f *leaseFaults) set(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.err = err
}

func (f *leaseFaults) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.attempts
}

// retriesWithin checks, n times, that another lease update is attempted
// within d of fake time once the controllers on clk are idle.
func retriesWithin(t *testing.T, clk *testclock.FakeClock, f *leaseFaults, n int, d time.Duration) {
	t.Helper()
	for i := range n {
		before := f.count()
		step(t, clk, d)
		idle(t, clk)
		require.Greater(t, f.count(), before, "retry %d came within %v", i+1, d)
	}
}

// step advances the fake clock by d once the controllers on it are idle:
// what they started has finished and nothing is due until a timer fires.
func step(t *testing.T, clk *testclock.FakeClock, d time.Duration) {
	t.Helper()
	idle(t, clk)
	clk.Step(d)
}

// stepUntil steps the clock by d each time the controllers look idle until
// cond holds. Idle is also what a controller shows while a ping that
// blocks on purpose runs (its timeout is armed), so one step may not reach
// the next ping; use it where extra steps do not weaken what the test
// checks.
func stepUntil(t *testing.T, clk *testclock.FakeClock, d time.Duration, cond func() bool) {
	t.Helper()
	require.Eventually(t, func() bool {
		if cond() {
			return true
		}
		if onClock.quiet(clk) {
			clk.Step(d)
		}
		return cond()
	}, waitFor, time.Millisecond)
}

// idle waits until every controller running on clk is quiet: no request
// in flight, no result, notification or fired timer it has not handled,
// and no ping running but one whose provider blocks on purpose (see
// pingGauge): a step never times out a Ping that answers at once, however
// late the scheduler runs it. A timer that fires makes its controller busy
// until it has handled it, so after a step, idle waits for the work the
// step caused.
func idle(t *testing.T, clk *testclock.FakeClock) {
	t.Helper()
	// Asked at once first: most steps cause no work, and polling costs a
	// tick and a goroutine per call, which a loaded machine makes
	// milliseconds; a budget test steps hundreds of times.
	if onClock.quiet(clk) {
		return
	}
	if !assert.Eventually(t, func() bool { return onClock.quiet(clk) }, waitFor, time.Millisecond, "controller idle") {
		for _, s := range onClock.state(clk) {
			t.Log(s)
		}
		t.FailNow()
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	cs := kubefake.NewClientset()
	ok := func() nodestatus.Config { return nodestatus.Config{Client: cs, Node: testNode("n")} }
	for name, mod := range map[string]func(*nodestatus.Config){
		"no client":          func(c *nodestatus.Config) { c.Client = nil },
		"no node":            func(c *nodestatus.Config) { c.Node = nil },
		"no name":            func(c *nodestatus.Config) { c.Node.Name = "" },
		"bad name":           func(c *nodestatus.Config) { c.Node.Name = "Not_A_Name" },
		"renew beyond grace": func(c *nodestatus.Config) { c.RenewInterval = 20 * time.Second },
		// One renewal hung for 19s, 0.24s of retry wait and a 19s retry
		// after a 19.76s wait: 58s between heartbeats.
		"hung renewal beyond grace": func(c *nodestatus.Config) {
			c.RenewInterval, c.NodeMonitorGracePeriod = 19*time.Second, 40*time.Second
		},
		"request timeout beyond grace": func(c *nodestatus.Config) {
			c.NodeMonitorGracePeriod, c.RequestTimeout = 40*time.Second, 15*time.Second
		},
		// Each relation on its own, where the others hold: 10.4s +
		// 2×15s + 0.24s is 40.64s, above a 40s grace period but within
		// a 60s lease...
		"hung renewal beyond grace within lease": func(c *nodestatus.Config) {
			c.LeaseDuration, c.NodeMonitorGracePeriod, c.RequestTimeout = 60*time.Second, 40*time.Second, 15*time.Second
		},
		// ... 5.2s + 2×8s + 0.24s is 21.44s, above a 20s lease but
		// within the 50s grace period...
		"hung renewal beyond lease within grace": func(c *nodestatus.Config) {
			c.LeaseDuration, c.RequestTimeout = 20*time.Second, 8*time.Second
		},
		// ... and 10.4s + 2×14.75s + 0.24s is 40.14s, above 40s only
		// with the renewal's jitter and the first retry wait counted.
		"jitter and retry wait counted": func(c *nodestatus.Config) {
			c.NodeMonitorGracePeriod, c.RequestTimeout = 40*time.Second, 14750*time.Millisecond
		},
		"duplicate default condition": func(c *nodestatus.Config) {
			c.DefaultConditions = []corev1.NodeCondition{{Type: "A"}, {Type: "A"}}
		},
		"renew beyond 50s grace": func(c *nodestatus.Config) {
			c.NodeMonitorGracePeriod = 50 * time.Second
			c.RenewInterval = 25 * time.Second
		},
		"renew beyond lease":        func(c *nodestatus.Config) { c.LeaseDuration = 10 * time.Second; c.RenewInterval = 10 * time.Second },
		"fractional lease duration": func(c *nodestatus.Config) { c.LeaseDuration = 1500 * time.Millisecond },
		"negative renew":            func(c *nodestatus.Config) { c.RenewInterval = -time.Second },
		"ping timeout above ping":   func(c *nodestatus.Config) { c.PingInterval = 2 * time.Second; c.PingTimeout = 3 * time.Second },
		"ping timeout above renew":  func(c *nodestatus.Config) { c.RenewInterval = 4 * time.Second; c.PingTimeout = 5 * time.Second },
		"jitter above 1":            func(c *nodestatus.Config) { c.RenewJitter = 1.5; c.RenewInterval = time.Second },
		"negative report interval":  func(c *nodestatus.Config) { c.StatusReportInterval = -time.Second },
		"negative shutdown timeout": func(c *nodestatus.Config) { c.ShutdownTimeout = -time.Second },
		"renew below a millisecond": func(c *nodestatus.Config) { c.RenewInterval = 500 * time.Microsecond },
		"ping below a millisecond":  func(c *nodestatus.Config) { c.PingInterval = 500 * time.Microsecond },
		"report below a millisecond": func(c *nodestatus.Config) {
			c.StatusReportInterval = 500 * time.Microsecond
		},
		"unknown ping policy": func(c *nodestatus.Config) { c.PingFailure = 7 },
		"unknown shutdown":    func(c *nodestatus.Config) { c.OnShutdown = 9 },
	} {
		t.Run(name, func(t *testing.T) {
			cfg := ok()
			mod(&cfg)
			_, err := nodestatus.New(cfg)
			require.ErrorIs(t, err, nodestatus.ErrInvalidConfig)
		})
	}
	_, err := nodestatus.New(ok())
	require.NoError(t, err, "defaults are valid")
	// A renewal interval that does not beat the lease also fails the
	// hung-renewal bound (RequestTimeout is never 0); it is named for what
	// it is.
	cfg := ok()
	cfg.LeaseDuration, cfg.RenewInterval = 10*time.Second, 10*time.Second
	_, err = nodestatus.New(cfg)
	require.ErrorContains(t, err, "does not beat LeaseDuration")
	cfg = ok()
	cfg.NodeMonitorGracePeriod = 40 * time.Second
	_, err = nodestatus.New(cfg)
	require.NoError(t, err, "10.4s + 2×10s + 0.24s fits in 40s")
	cfg = ok()
	cfg.NodeMonitorGracePeriod, cfg.RequestTimeout = 40*time.Second, 14*time.Second
	_, err = nodestatus.New(cfg)
	require.NoError(t, err, "10.4s + 2×14s + 0.24s fits in 40s; 15s (the case above) does not")
}

func TestLeaseRenewedEveryQuarterDuration(t *testing.T) {
	cs := fake.NewClientset()
	v := countVerbs(cs)
	clk := newFakeClock()
	// Pings run every 10 s meanwhile: none is stepped over while in
	// flight (see idle), so none fails, and none is a status report.
	startReady(t, fakeConfig(cs, clk, nil))

	l, err := cs.CoordinationV1().Leases("kube-node-lease").Get(context.Background(), "vk-0", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "vk-0", *l.Spec.HolderIdentity)
	require.EqualValues(t, 40, *l.Spec.LeaseDurationSeconds, "the duration is not multiplied")
	require.NotNil(t, l.Spec.RenewTime)

	base, gets := v.get("update leases"), v.get("get nodes")
	require.Equal(t, 1, gets, "registration reads the node once")
	for i := 1; i <= 5; i++ {
		// Renewals come 10s to 10.4s after the previous one ended.
		// A timer that fires takes its waiter away at once, and the lease
		// timer is armed again only after the renewal it started has
		// finished: once the controller is idle again, a renewal due by
		// now has been counted.
		step(t, clk, 9900*time.Millisecond)
		idle(t, clk)
		require.Equal(t, base+i-1, v.get("update leases"), "no renewal before 10s")
		clk.Step(500 * time.Millisecond)
		idle(t, clk)
		require.Equal(t, base+i, v.get("update leases"), "one renewal by 10.4s")
	}
	idle(t, clk)
	require.Equal(t, gets, v.get("get nodes"), "no GET of the node in steady state")
	require.Zero(t, v.get("patch nodes/status"), "nothing changed, no report due")
}

func TestStatusReportedEveryReportInterval(t *testing.T) {
	cs := kubefake.NewClientset()
	v := countVerbs(cs)
	clk := newFakeClock()
	cfg := fakeConfig(cs, clk, nil)
	cfg.RenewInterval = 10 * time.Second
	cfg.StatusReportInterval = time.Minute
	// Pings run every 10 s meanwhile: none is stepped over while in
	// flight (see idle), so none fails and adds two reports.
	startReady(t, cfg)
	n0, err := cs.CoreV1().Nodes().Get(context.Background(), "vk-0", metav1.GetOptions{})
	require.NoError(t, err)
	hb0 := condition(n0, corev1.NodeReady).LastHeartbeatTime

	// Within one report interval (at least 30s after registration, at
	// most 60s), exactly one report.
	for range 6 {
		step(t, clk, 10500*time.Millisecond)
	}
	idle(t, clk) // a report in flight holds its timer
	require.Equal(t, 1, v.get("patch nodes/status"))
	n1, err := cs.CoreV1().Nodes().Get(context.Background(), "vk-0", metav1.GetOptions{})
	require.NoError(t, err)
	require.True(t, condition(n1, corev1.NodeReady).LastHeartbeatTime.After(hb0.Time), "the report refreshes heartbeat times")
	require.True(t, condition(n0, corev1.NodeReady).LastTransitionTime.Equal(&condition(n1, corev1.NodeReady).LastTransitionTime), "no transition")
}

func TestNotifyNeverBlocksAndCoalesces(t *testing.T) {
	cs := kubefake.NewClientset()
	clk := newFakeClock()
	p := nodestatustest.NewProvider(testNode("vk-0"))
	c := startReady(t, fakeConfig(cs, clk, p))
	for i := range 1000 {
		p.UpdateStatus(func(n *corev1.Node) { n.Labels["gen"] = string(rune('a' + i%26)) })
	}
	p.UpdateStatus(func(n *corev1.Node) { n.Labels["gen"] = "last" })
	require.Eventually(t, func() bool {
		n, err := cs.CoreV1().Nodes().Get(context.Background(), "vk-0", metav1.GetOptions{})
		return err == nil && n.Labels["gen"] == "last"
	}, waitFor, time.Millisecond)

	select {
	case <-c.Done():
		t.Fatalf("Run returned while notified: %v", c.Err())
	default:
	}
	require.NoError(t, c.stop(t), "Run returns nil when its context ends")
	// After Run returned the callback still returns at once.
	done := make(chan struct{})
	go func() {
		for range 100 {
			p.UpdateStatus(func(n *corev1.Node) { n.Labels["gen"] = "after" })
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(waitFor):
		t.Fatal("the status callback blocked after Run returned")
	}
}

func TestPingFailureSetsNotReadyAndKeepsLease(t *testing.T) {
	cs := kubefake.NewClientset()
	v := countVerbs(cs)
	clk := newFakeClock()
	// Its hanging Ping blocks on purpose: step may step over it.
	p := newHangingProvider(nodestatustest.NewProvider(testNode("vk-0")))
	startReady(t, fakeConfig(cs, clk, p))

	p.SetPingError(errors.New("backend unreachable"))
	readyIs := func(status corev1.ConditionStatus, reason string) func(*corev1.Node) bool {
		return nodestatustest.ConditionIs(corev1.NodeReady, status, reason)
	}
	leases := v.get("update leases")
	step(t, clk, 10500*time.Millisecond) // next ping and renewal
	waitNode(t, cs, "vk-0", readyIs(corev1.ConditionFalse, nodestatus.ReasonPingFailed), "Ready=False")
	require.Eventually(t, func() bool { return v.get("update leases") > leases }, waitFor, time.Millisecond, "the lease keeps renewing")

	// A ping that hangs is cancelled after PingTimeout and reported.
	p.SetPingError(nil)
	step(t, clk, 10500*time.Millisecond)
	waitNode(t, cs, "vk-0", readyIs(corev1.ConditionTrue, "ProviderReady"), "Ready=True")
	p.SetPingHang(true)
	pings := p.Pings()
	step(t, clk, 10500*time.Millisecond)
	waitPings(t, p.Provider, pings+1)
	step(t, clk, 5*time.Second)
	waitNode(t, cs, "vk-0", func(n *corev1.Node) bool {
		return strings.Contains(condition(n, corev1.NodeReady).Message, "did not return within 5s")
	}, "the hanging ping is reported")
}

func TestPingFailureStopHeartbeat(t *testing.T) {
	cs := kubefake.NewClientset()
	v := countVerbs(cs)
	clk := newFakeClock()
	p := nodestatustest.NewProvider(testNode("vk-0"))
	cfg := fakeConfig(cs, clk, p)
	cfg.PingFailure = nodestatus.PingFailureStopHeartbeat
	startReady(t, cfg)
	p.SetPingError(errors.New("down"))
	pings := p.Pings()
	step(t, clk, 10500*time.Millisecond)
	waitPings(t, p, pings+1)
	// Let the renewal that may have raced with the failing ping finish.
	stepUntil(t, clk, 10500*time.Millisecond, func() bool { return p.Pings() > pings+1 })
	leases := v.get("update leases")
	for i := range 3 {
		stepUntil(t, clk, 10500*time.Millisecond, func() bool { return p.Pings() > pings+2+i })
	}
	idle(t, clk)
	require.Equal(t, leases, v.get("update leases"), "no renewal while pings fail")
	p.SetPingError(nil)
	stepUntil(t, clk, 10500*time.Millisecond, func() bool { return v.get("update leases") > leases })
}

// With PingFailureIgnore a failing ping is only logged: the lease keeps
// renewing and the status is not written.
func TestPingFailureIgnore(t *testing.T) {
	cs := kubefake.NewClientset()
	v := countVerbs(cs)
	clk := newFakeClock()
	p := nodestatustest.NewProvider(testNode("vk-0"))
	cfg := fakeConfig(cs, clk, p)
	cfg.PingFailure = nodestatus.PingFailureIgnore
	startReady(t, cfg)
	idle(t, clk)
	leases, patches := v.get("update leases"), v.get("patch nodes/status")
	p.SetPingError(errors.New("down"))
	pings := p.Pings()
	stepUntil(t, clk, 10500*time.Millisecond, func() bool { return p.Pings() > pings+2 })
	idle(t, clk)
	require.Greater(t, v.get("update leases"), leases, "renewals go on")
	require.Equal(t, patches, v.get("patch nodes/status"), "the status is not written")
	n, err := cs.CoreV1().Nodes().Get(context.Background(), "vk-0", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, corev1.ConditionTrue, condition(n, corev1.NodeReady).Status)
}

func TestFallsBackToStatusHeartbeatsWithoutLeaseAPI(t *testing.T) {
	cs := fake.NewClientset()
	cs.PrependReactor("*", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
		// What an API server without the resource answers: an unnamed 404.
		return true, nil, &apierrors.StatusError{ErrStatus: metav1.Status{
			Status: metav1.StatusFailure, Code: 404, Reason: metav1.StatusReasonNotFound,
			Message: "the server could not find the requested resource",
		}}
	})
	v := countVerbs(cs)
	clk := newFakeClock()
	startReady(t, fakeConfig(cs, clk, nil))
	base := v.get("patch nodes/status")
	for i := 1; i <= 3; i++ {
		step(t, clk, 10500*time.Millisecond)
		require.Eventually(t, func() bool { return v.get("patch nodes/status") >= base+i }, waitFor, time.Millisecond)
	}
	require.Zero(t, v.get("update leases"))
}

// An unnamed 404 for a lease is a missing Lease API only when discovery
// confirms it: a discovery that fails, or that lists leases, leaves the
// controller renewing its lease, not heartbeating through status writes
// for good.
func TestUnconfirmedLeaseAPIMissingKeepsRenewing(t *testing.T) {
	for name, discovery := range map[string]func(*fake.Clientset){
		"discovery fails": func(cs *fake.Clientset) {
			cs.PrependReactor("get", "resource", func(k8stesting.Action) (bool, runtime.Object, error) {
				return true, nil, apierrors.NewServiceUnavailable("discovery is down")
			})
		},
		"discovery lists leases": func(cs *fake.Clientset) {
			cs.Resources = []*metav1.APIResourceList{{
				GroupVersion: coordinationv1.SchemeGroupVersion.String(),
				APIResources: []metav1.APIResource{{Name: "leases", Namespaced: true, Kind: "Lease"}},
			}}
		},
	} {
		t.Run(name, func(t *testing.T) {
			cs := kubefake.NewClientset()
			discovery(cs)
			cs.PrependReactor("*", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
				// An unnamed 404, as a misrouting proxy may answer.
				return true, nil, &apierrors.StatusError{ErrStatus: metav1.Status{
					Status: metav1.StatusFailure, Code: 404, Reason: metav1.StatusReasonNotFound,
					Message: "the server could not find the requested resource",
				}}
			})
			v := countVerbs(cs)
			clk := newFakeClock()
			start(t, fakeConfig(cs, clk, nil))
			require.Eventually(t, func() bool { return v.get("get leases") > 0 }, waitFor, time.Millisecond, "a first renewal")
			idle(t, clk)
			patches, gets := v.get("patch nodes/status"), v.get("get leases")
			for range 3 {
				step(t, clk, 10500*time.Millisecond)
			}
			idle(t, clk)
			require.GreaterOrEqual(t, v.get("get leases"), gets+3, "the lease is still tried")
			require.Equal(t, patches, v.get("patch nodes/status"), "no status heartbeats: the Lease API was not found missing")
		})
	}
}

func TestLeaseOwnerFollowsRecreatedNode(t *testing.T) {
	cs := fake.NewClientset()
	clk := newFakeClock()
	p := nodestatustest.NewProvider(testNode("vk-0"))
	var uid int
	cs.PrependReactor("create", "nodes", func(a k8stesting.Action) (bool, runtime.Object, error) {
		// The fake assigns no UIDs; the API server does.
		uid++
		n := a.(k8stesting.CreateAction).GetObject().(*corev1.Node)
		n.UID = types.UID(fmt.Sprintf("uid-%d", uid))
		return false, nil, nil
	})
	cfg := fakeConfig(cs, clk, p)
	cfg.ReRegister = true
	startReady(t, cfg)
	lease := func() *coordinationv1.Lease {
		l, err := cs.CoordinationV1().Leases("kube-node-lease").Get(context.Background(), "vk-0", metav1.GetOptions{})
		require.NoError(t, err)
		return l
	}
	require.EqualValues(t, "uid-1", lease().OwnerReferences[0].UID)

	ctx := context.Background()
	require.NoError(t, cs.CoreV1().Nodes().Delete(ctx, "vk-0", metav1.DeleteOptions{}))
	p.UpdateStatus(func(n *corev1.Node) { n.Labels["after"] = "delete" })
	require.Eventually(t, func() bool {
		n, err := cs.CoreV1().Nodes().Get(ctx, "vk-0", metav1.GetOptions{})
		return err == nil && n.UID == "uid-2" && n.Labels["after"] == "delete"
	}, waitFor, time.Millisecond, "re-registered")
	require.Eventually(t, func() bool { return lease().OwnerReferences[0].UID == "uid-2" }, waitFor, time.Millisecond, "the owner reference follows at once")
}

func TestRetryWaitsNeverExceedFiveSeconds(t *testing.T) {
	cs := kubefake.NewClientset()
	faults := failLeaseUpdates(cs)
	clk := newFakeClock()
	startReady(t, fakeConfig(cs, clk, nil))
	faults.set(apierrors.NewInternalError(errors.New("etcd is down")))
	step(t, clk, 10500*time.Millisecond) // the renewal that starts failing
	// Far past the point where 200ms × 1.5ⁿ reaches the cap: every wait,
	// jitter included, ends within 5s.
	retriesWithin(t, clk, faults, 20, 5*time.Second)
}

// hooks is a Metrics hook and an EventRecorder that remember what they saw.
type hooks struct {
	mu     sync.Mutex
	obs    []nodestatus.Observation
	events []string
}

func (h *hooks) Observe(o nodestatus.Observation) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.obs = append(h.obs, o)
}

func (h *hooks) Event(eventtype, reason, message string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.events = append(h.events, eventtype+" "+reason)
}

func (h *hooks) saw(call nodestatus.Call, out nodestatus.Outcome, code int) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, o := range h.obs {
		if o.Call == call && o.Outcome == out && o.Code == code {
			return true
		}
	}
	return false
}

func (h *hooks) sawEvent(e string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Contains(h.events, e)
}

func TestMetricsAndEvents(t *testing.T) {
	cs := kubefake.NewClientset()
	cs.PrependReactor("patch", "nodes", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() == "status" && strings.Contains(string(a.(k8stesting.PatchAction).GetPatch()), `"bad":"label"`) {
			return true, nil, apierrors.NewInvalid(schema.GroupKind{Kind: "Node"}, "vk-0", field.ErrorList{field.Invalid(field.NewPath("metadata", "labels"), "bad", "not allowed")})
		}
		return false, nil, nil
	})
	clk := newFakeClock()
	p := nodestatustest.NewProvider(testNode("vk-0"))
	h := &hooks{}
	cfg := fakeConfig(cs, clk, p)
	cfg.Metrics, cfg.Events, cfg.ReRegister = h, h, true
	startReady(t, cfg)
	require.True(t, h.sawEvent("Normal "+nodestatus.EventRegistered), "registration: %v", h.events)
	require.True(t, h.saw(nodestatus.CallCreateNode, nodestatus.OutcomeOK, 200))
	require.True(t, h.saw(nodestatus.CallCreateLease, nodestatus.OutcomeOK, 200))
	require.Eventually(t, func() bool { return h.saw(nodestatus.CallPing, nodestatus.OutcomeOK, 0) }, waitFor, time.Millisecond, "the first ping is observed")

	step(t, clk, 10500*time.Millisecond)
	require.Eventually(t, func() bool { return h.saw(nodestatus.CallUpdateLease, nodestatus.OutcomeOK, 200) }, waitFor, time.Millisecond, "a heartbeat is observed")

	p.SetPingError(errors.New("backend down"))
	stepUntil(t, clk, 10500*time.Millisecond, func() bool { return h.saw(nodestatus.CallPing, nodestatus.OutcomeFailed, 0) })

	// A rejected status: a 422 observed with its code, and a Warning.
	p.UpdateStatus(func(n *corev1.Node) { n.Labels["bad"] = "label" })
	require.Eventually(t, func() bool { return h.saw(nodestatus.CallPatchStatus, nodestatus.OutcomeRejected, 422) }, waitFor, time.Millisecond, "the 422 is observed")
	require.Eventually(t, func() bool { return h.sawEvent("Warning " + nodestatus.EventStatusRejected) }, waitFor, time.Millisecond, "the rejection is an event")
	require.False(t, h.sawEvent("Normal "+nodestatus.EventReRegistered))

	// Deleted and registered again.
	require.NoError(t, cs.CoreV1().Nodes().Delete(context.Background(), "vk-0", metav1.DeleteOptions{}))
	p.UpdateStatus(func(n *corev1.Node) { delete(n.Labels, "bad"); n.Labels["good"] = "label" })
	require.Eventually(t, func() bool { return h.saw(nodestatus.CallPatchStatus, nodestatus.OutcomeNotFound, 404) }, waitFor, time.Millisecond, "the 404 is observed")
	require.Eventually(t, func() bool { return h.sawEvent("Normal " + nodestatus.EventReRegistered) }, waitFor, time.Millisecond, "re-registration is an event")
}
