package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/reconkit/reconkit/checkpoint"
	"github.com/reconkit/reconkit/kubefake"
	"github.com/reconkit/reconkit/lbrecon"
	"github.com/reconkit/reconkit/lbrecon/lbrecontest"
)

const (
	namespace = "kube-system"
	tag       = "owner=outsider"
	settings  = `{"addresses": ["192.0.2.10"], "ports": [{"name": "http", "nodePort": 30080, "externalPort": 80}]}`
)

// agent is one agent of the test and what the test follows it by.
type agent struct {
	name, ip string
	mux      *http.ServeMux
	stop     context.CancelFunc
	done     chan error // Run's result
}

// get serves path on the agent's mux and returns the status and the body.
func (a *agent) get(t *testing.T, path string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	a.mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	return rec.Code, rec.Body.String()
}

// leading reports whether the agent's /metrics says it holds a term.
func (a *agent) leading(t *testing.T) bool {
	t.Helper()
	code, body := a.get(t, "/metrics")
	if code != http.StatusOK {
		t.Fatalf("%s: /metrics answered %d: %s", a.name, code, body)
	}
	return strings.Contains(body, fmt.Sprintf("leader_election_master_status{name=%q} 1\n", a.name))
}

// onlyLeader returns the one agent of agents that leads, once every
// goroutine of the bubble is blocked (so the agents' flags are settled), and
// fails the test unless exactly one does.
func onlyLeader(t *testing.T, agents []*agent) *agent {
	t.Helper()
	synctest.Wait()
	var leaders []*agent
	var names []string
	for _, a := range agents {
		if a.leading(t) {
			leaders = append(leaders, a)
			names = append(names, a.name)
		}
	}
	if len(leaders) != 1 {
		t.Fatalf("leaders %v, want exactly one", names)
	}
	return leaders[0]
}

// balancer is the load balancer the settings describe over agents' nodes.
func balancer(t *testing.T, agents ...*agent) lbrecon.LoadBalancer {
	t.Helper()
	var targets []lbrecon.Target
	for _, a := range agents {
		targets = append(targets, lbrecon.Target{Name: a.name, Address: netip.MustParseAddr(a.ip)})
	}
	return Settings{Addresses: []netip.Addr{netip.MustParseAddr("192.0.2.10")},
		Ports: []lbrecon.Port{{Name: "http", NodePort: 30080, ExternalPort: 80}}}.LoadBalancer(targets)
}

// TestThreeAgents runs three agents on kubefake, whose Leases are written
// with resourceVersion preconditions as on the apiserver, in a synctest
// bubble (every lease duration, heartbeat and reconcile interval is at its
// default and passes in fake time). Exactly one leads, and its load
// balancer's servers are the three healthy Nodes. When the leader's context
// ends, another agent leads with a higher token, and once the stopped
// agent's Node heartbeat goes stale the load balancer's servers are the two
// live Nodes. When the ConfigMap gives the load balancer another ID, the
// new one is built and the old one torn down. No write to the load balancer is ever refused by the fence:
// no agent wrote after a successor did.
func TestThreeAgents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute) // of fake time
		defer cancel()
		ctx = logr.NewContext(ctx, testr.New(t))
		kube := kubefake.NewClientset(&corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "outsider"},
			Data:       map[string]string{"settings.json": settings},
		})
		engine := lbrecontest.New(lbrecontest.Config{})
		// The provider's side of fencing: every write carries its term's
		// token, never one older than a write before it.
		fence := lbrecon.NewFence("the test's load balancer", 0, "restart the test")
		var refused atomic.Int64
		fenced := lbrecon.Guard(engine, lbrecon.CheckToken(func(token uint64) error {
			err := fence.Admit(token)
			if err != nil {
				refused.Add(1)
			}
			return err
		}))

		var agents []*agent
		for i, name := range []string{"node-a", "node-b", "node-c"} {
			runCtx, stop := context.WithCancel(ctx)
			a := &agent{name: name, ip: fmt.Sprintf("10.0.0.%d", i+1), mux: http.NewServeMux(), stop: stop, done: make(chan error, 1)}
			agents = append(agents, a)
			d := Deps{Kube: kube, Node: a.name, IP: a.ip, Namespace: namespace, Store: &checkpoint.MemStore{}, Rand: func(string) func() float64 { return nil },
				Engine: fenced, Mux: a.mux}
			go func() { a.done <- Run(runCtx, d) }()
		}
		stopAll := func(agents []*agent) {
			for _, a := range agents {
				a.stop()
				if err := <-a.done; err != nil {
					t.Errorf("%s: Run after its context ended = %v, want nil", a.name, err)
				}
			}
		}

		if err := engine.WaitConverged(ctx, balancer(t, agents...), tag); err != nil {
			t.Fatal(err)
		}
		first := onlyLeader(t, agents)
		firstToken := fence.Highest()
		for _, a := range agents {
			if code, body := a.get(t, "/healthz?verbose"); code != http.StatusOK {
				t.Errorf("%s: /healthz answered %d:\n%s", a.name, code, body)
			}
		}

		// The leader stops; another takes over and drops its Node once
		// its heartbeat is stale.
		var rest []*agent
		for _, a := range agents {
			if a != first {
				rest = append(rest, a)
			}
		}
		stopAll([]*agent{first})
		if err := engine.WaitConverged(ctx, balancer(t, rest...), tag); err != nil {
			t.Fatal(err)
		}
		second := onlyLeader(t, rest)
		t.Logf("%s led with token %#x, then %s with %#x", first.name, firstToken, second.name, fence.Highest())
		if fence.Highest() <= firstToken {
			t.Errorf("after the failover writes carry token %#x, want above %#x", fence.Highest(), firstToken)
		}

		// The ConfigMap moves the load balancer to another ID: the new one
		// is built and the old one torn down, nothing else left.
		cm, err := kube.CoreV1().ConfigMaps(namespace).Get(ctx, "outsider", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cm.Data["settings.json"] = strings.Replace(settings, "{", `{"id": "moved", `, 1)
		if _, err := kube.CoreV1().ConfigMaps(namespace).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		movedLB := balancer(t, rest...)
		movedLB.ID = "moved"
		onlyMoved := lbrecontest.Converged(movedLB, tag)
		if err := engine.WaitFor(ctx, func(objs []lbrecon.Object) bool {
			return onlyMoved(objs) && len(objs) == 2+1+len(rest) // backend, frontend, bind, servers
		}); err != nil {
			t.Fatal(err)
		}
		if n := refused.Load(); n != 0 {
			t.Errorf("the fence refused %d writes: an agent wrote after its successor", n)
		}
		stopAll(rest)
	})
}
