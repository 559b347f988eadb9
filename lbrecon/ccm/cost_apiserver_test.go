package ccm_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/reconkit/reconkit/internal/testenv"
	"github.com/reconkit/reconkit/lbrecon"
	"github.com/reconkit/reconkit/lbrecon/ccm"
	"github.com/reconkit/reconkit/lbrecon/ccm/ccmtest"
	"github.com/reconkit/reconkit/lbrecon/lbrecontest"
)

// provisioningCost is what one Service's provisioning cost, through the
// real service controller, until its address is published.
type provisioningCost struct {
	took               time.Duration
	providerCalls      int   // provider requests (a List is 1 + N)
	balancerRequests   int64 // the Balancer's apiserver requests (its journal)
	controllerRequests int64 // the service controller's apiserver requests
	lbCalls            int64
	ensures, updates   int64 // EnsureLoadBalancer and UpdateLoadBalancer calls
	events, warnings   int
	eventObjects       int
	byReason           map[string]int // the service controller's events, by "type reason"
	retries            []string       // each RetryError's delay
	updateErrs         []string       // each error UpdateLoadBalancer returned
	eventLog           []string       // every event on the Service: source, type, reason, count, message
}

// recordingLB records the delay of each RetryError EnsureLoadBalancer
// returns, and each error of UpdateLoadBalancer, which the controller's
// node sync may call for a Service it has begun to provision.
type recordingLB struct {
	cloudprovider.LoadBalancer
	mu         sync.Mutex
	retries    []string
	updateErrs []string
}

func (r *recordingLB) UpdateLoadBalancer(ctx context.Context, cluster string, svc *v1.Service, nodes []*v1.Node) error {
	err := r.LoadBalancer.UpdateLoadBalancer(ctx, cluster, svc, nodes)
	if err != nil {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.updateErrs = append(r.updateErrs, err.Error())
	}
	return err
}

func (r *recordingLB) EnsureLoadBalancer(ctx context.Context, cluster string, svc *v1.Service, nodes []*v1.Node) (*v1.LoadBalancerStatus, error) {
	st, err := r.LoadBalancer.EnsureLoadBalancer(ctx, cluster, svc, nodes)
	if err != nil {
		r.mu.Lock()
		defer r.mu.Unlock()
		msg := err.Error()
		if i := strings.Index(msg, "not converged yet"); i >= 0 {
			msg = msg[i:]
		}
		r.retries = append(r.retries, msg)
	}
	return st, err
}

// countingProxy is a plain-HTTP reverse proxy in front of the apiserver
// that counts the requests through it: the service controller's.
func countingProxy(t *testing.T, cfg *rest.Config, n *atomic.Int64) *rest.Config {
	t.Helper()
	rt, err := rest.TransportFor(cfg)
	require.NoError(t, err)
	target, err := url.Parse(cfg.Host)
	require.NoError(t, err)
	p := httputil.NewSingleHostReverseProxy(target)
	p.Transport = rt
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("watch") != "true" {
			n.Add(1)
		}
		p.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return &rest.Config{Host: srv.URL, QPS: -1}
}

// measureProvisioning provisions one Service on an apiserver of its own
// (a controller started on an apiserver with Services of other Balancers
// would sync those too).
func measureProvisioning(t *testing.T, name string, rc lbrecon.Config) provisioningCost {
	t.Helper()
	ctx := t.Context()
	a := testenv.APIServer(t)
	cs := kubernetes.NewForConfigOrDie(a.Config())
	createNode(t, cs, "n1", "10.0.0.1")
	createNode(t, cs, "n2", "10.0.0.2")
	var balancerRequests, controllerRequests atomic.Int64
	jcfg := rest.CopyConfig(a.Config())
	jcfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { return countingTransport{next: rt, n: &balancerRequests} }
	jcs := kubernetes.NewForConfigOrDie(jcfg)
	eng := lbrecontest.New(lbrecontest.Config{Pending: 100 * time.Millisecond, ListLag: testLag, DeleteDelay: 200 * time.Millisecond,
		Integrity: true, UniqueBinds: true})
	b, err := ccm.New(ccm.Config{Engine: eng, Mapping: testMapping, Token: func(context.Context) (uint64, error) { return 1, nil },
		Journal: ccm.NewConfigMapJournal(jcs.CoreV1(), ccm.ConfigMapJournalOptions{}), Reconciler: rc})
	require.NoError(t, err)
	lb := &recordingLB{LoadBalancer: b}
	c, err := ccmtest.Start(ctx, ccmtest.Config{REST: countingProxy(t, a.Config(), &controllerRequests), Balancer: lb})
	require.NoError(t, err)
	defer func() { require.NoError(t, c.Stop()) }()
	controllerRequests.Store(0)

	start := time.Now()
	svc, err := cs.CoreV1().Services("default").Create(ctx, &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer, Selector: map[string]string{"app": name},
			Ports: []v1.ServicePort{
				{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: v1.ProtocolTCP},
				{Name: "https", Port: 443, TargetPort: intstr.FromInt32(8443), Protocol: v1.ProtocolTCP},
			}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	var out provisioningCost
	// until polls cond every 20 ms until it holds, failing after
	// stepTimeout or when the controller exited.
	until := func(cond func() bool, what string) {
		t.Helper()
		deadline := time.Now().Add(stepTimeout)
		for !cond() {
			require.True(t, time.Now().Before(deadline), "%s not within %v; the controller's output:\n%s", what, stepTimeout, c.Log())
			select {
			case <-time.After(20 * time.Millisecond):
			case <-c.Done():
				t.Fatal(c.Err())
			}
		}
	}
	until(func() bool {
		cur, err := cs.CoreV1().Services("default").Get(ctx, name, metav1.GetOptions{})
		require.NoError(t, err)
		return len(cur.Status.LoadBalancer.Ingress) == 1
	}, "an address")
	out.took = time.Since(start)
	// The controller's events reach the apiserver from a goroutine of its
	// recorder, one at a time in the order recorded, and those still
	// queued when it stops are dropped: the address published, the last
	// ones may not be written yet. The last event of the sync,
	// EnsuredLoadBalancer, is recorded just before the status patch; once
	// the apiserver holds it, it holds every earlier one, and only then is
	// the controller stopped.
	until(func() bool {
		events, err := cs.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.uid=" + string(svc.UID)})
		require.NoError(t, err)
		for _, e := range events.Items {
			if e.Reason == "EnsuredLoadBalancer" {
				return true
			}
		}
		return false
	}, "the EnsuredLoadBalancer event")
	require.NoError(t, c.Stop())
	out.providerCalls = eng.Requests()
	out.balancerRequests = balancerRequests.Load()
	out.controllerRequests = controllerRequests.Load()
	calls := c.Calls()
	out.lbCalls, out.ensures, out.updates = calls.Total(), calls.Ensure, calls.Update
	out.byReason = map[string]int{}
	events, err := cs.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.uid=" + string(svc.UID)})
	require.NoError(t, err)
	for _, e := range events.Items {
		out.eventLog = append(out.eventLog, fmt.Sprintf("%s %s %s ×%d: %s", e.Source.Component, e.Type, e.Reason, max(e.Count, 1), e.Message))
		// Other components write events about the Service too (the
		// apiserver's ClusterIP repair loop warns of an IP it has not
		// seen allocated yet, under load): only the service
		// controller's are its cost.
		if e.Source.Component != "service-controller" {
			continue
		}
		out.eventObjects++
		out.events += int(max(e.Count, 1))
		out.byReason[e.Type+" "+e.Reason] += int(max(e.Count, 1))
		if e.Type == v1.EventTypeWarning {
			out.warnings += int(max(e.Count, 1))
		}
	}
	lb.mu.Lock()
	out.retries, out.updateErrs = lb.retries, lb.updateErrs
	lb.mu.Unlock()
	return out
}

// What one provisioning (2 ports, 2 nodes, a listing lagging 300 ms,
// creations pending 100 ms) costs through the real service controller,
// under three reconciler configurations side by side:
//
//	go test -race -count=1 -run TestProvisioningCostThroughTheController -v ./lbrecon/ccm/
//
// A RetryError sooner than the list lag after a pass's creations is a
// call, two events (one a Warning) and two of the controller's requests
// for nothing: no listing can show the creations yet. lbrecon's
// RequeueAfter grows from PollInterval and only learns the lag from
// writes it saw confirmed, so the first passes of a Service retry at
// PollInterval. Every RetryError
// EnsureLoadBalancer returns is, in the controller
// (processServiceCreateOrUpdate), one Normal event "EnsuringLoadBalancer"
// and one Warning "SyncLoadBalancerFailed", plus the controller's requests
// that send them.
func TestProvisioningCostThroughTheController(t *testing.T) {
	configs := []struct {
		name string
		rc   lbrecon.Config
	}{
		// The tests' configuration: polls 6 times as often as the lag.
		{"poll 50ms", lbrecon.Config{PollInterval: 50 * time.Millisecond, MaxPollInterval: 500 * time.Millisecond, ListLag: testLag, CallTimeout: 5 * time.Second}},
		// Polls no more often than the lag: a pass's creations cannot
		// show in a listing sooner.
		{"poll = lag", lbrecon.Config{PollInterval: testLag, MaxPollInterval: 500 * time.Millisecond, ListLag: testLag, CallTimeout: 5 * time.Second}},
		// lbrecon's defaults (PollInterval 500 ms).
		{"defaults", lbrecon.Config{ListLag: testLag}},
	}
	var rows []string
	for i, cfg := range configs {
		got := measureProvisioning(t, fmt.Sprintf("web-%d", i), cfg.rc)
		rows = append(rows, fmt.Sprintf("%-12s %8v %9d %9d %11d %8d %7d %9d %8d",
			cfg.name, got.took.Round(100*time.Millisecond), got.providerCalls, got.balancerRequests, got.controllerRequests,
			got.lbCalls, got.events, got.warnings, got.eventObjects))
		for _, r := range got.retries {
			t.Logf("%s: RetryError: %s", cfg.name, r)
		}
		for _, e := range got.eventLog {
			t.Logf("%s: event: %s", cfg.name, e)
		}
		for _, e := range got.updateErrs {
			t.Logf("%s: UpdateLoadBalancer: %s", cfg.name, e)
		}
		// The controller turns each RetryError of EnsureLoadBalancer
		// into one Warning (SyncLoadBalancerFailed) and each call into
		// one Normal (EnsuringLoadBalancer), the last into
		// EnsuredLoadBalancer.
		require.Equal(t, len(got.retries), got.byReason["Warning SyncLoadBalancerFailed"], "%s: one Warning per RetryError", cfg.name)
		require.Equal(t, int(got.ensures), got.byReason["Normal EnsuringLoadBalancer"], "%s: one Normal per EnsureLoadBalancer call", cfg.name)
		require.Equal(t, int(got.ensures), got.byReason["Warning SyncLoadBalancerFailed"]+got.byReason["Normal EnsuredLoadBalancer"],
			"%s: each EnsureLoadBalancer call ends in a Warning or EnsuredLoadBalancer", cfg.name)
		// One RetryError per phase the plan waits a listing for:
		// backends, then servers and frontends, then binds, whatever
		// the poll interval: a pass that created asks again no sooner
		// than the declared lag. The controller's node sync may call
		// UpdateLoadBalancer for the Service while it is provisioned (on
		// a loaded machine, its first sync of the Nodes comes after the
		// Service): a pass the Balancer did not schedule, whose
		// creations the next EnsureLoadBalancer finds pending, and
		// whose RetryError is a Warning of its own
		// (UpdateLoadBalancerFailed). The bound is on the passes
		// EnsureLoadBalancer's RetryErrors asked for.
		if got.updates > 0 {
			t.Logf("%s: the node sync called UpdateLoadBalancer %d times while the Service was provisioned; its passes are not bounded here", cfg.name, got.updates)
			continue
		}
		require.Equal(t, len(got.retries), got.warnings, "%s: no Warning but the RetryErrors'", cfg.name)
		require.LessOrEqual(t, len(got.retries), 3, "%s: a RetryError sooner than the lag", cfg.name)
	}
	t.Logf("one provisioning through the service controller:\n%-12s %8s %9s %9s %11s %8s %7s %9s %8s\n%s",
		"config", "took", "provider", "balancer", "controller", "lbcalls", "events", "warnings", "objects", strings.Join(rows, "\n"))
}
