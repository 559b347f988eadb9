package main

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/reconkit/reconkit/backoff"
	"github.com/reconkit/reconkit/checkpoint"
	"github.com/reconkit/reconkit/election/electiontest"
	"github.com/reconkit/reconkit/lbrecon"
	"github.com/reconkit/reconkit/lbrecon/lbrecontest"
	"github.com/reconkit/reconkit/nodestatus/nodestatustest"
	"github.com/reconkit/reconkit/versiongate"
	"github.com/reconkit/reconkit/versiongate/versiongatetest"
)

const namespace = "kube-system"

// settings returns the JSON of a load balancer with the given ID and
// external port, forwarding to both agents.
func settings(t *testing.T, id string, port uint16) string {
	t.Helper()
	s := fmt.Sprintf(`{"loadBalancer": %q, "addresses": ["192.0.2.10"],
		"ports": [{"name": "http", "nodePort": 30080, "externalPort": %d}],
		"targets": [{"name": "node-a", "address": "10.0.0.1"}, {"name": "node-b", "address": "10.0.0.2"}]}`, id, port)
	if !json.Valid([]byte(s)) {
		t.Fatalf("invalid settings %s", s)
	}
	return s
}

func loadBalancer(t *testing.T, js string) lbrecon.LoadBalancer {
	t.Helper()
	s, err := parseSettings([]byte(js))
	if err != nil {
		t.Fatal(err)
	}
	lb, err := s.loadBalancer()
	if err != nil {
		t.Fatal(err)
	}
	return lb
}

// TestAgents runs two agents of one release on the supplied fakes and
// follows them with the fakes' wait helpers: both Nodes registered with
// their labels and addresses and the ConfigOK and ReleaseAdmitted
// conditions; the leader converges the assigned load balancer; a new
// assignment with another ID tears the old one down; after a failover the
// new leader, with a higher token, converges the next assignment and tears
// down the load balancer its predecessor built.
func TestAgents(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	kube := fake.NewClientset()
	cm := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "outsider"},
		Data:       map[string]string{"settings.json": settings(t, "lb-1", 80)},
	}
	if _, err := kube.CoreV1().ConfigMaps(namespace).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	elections := electiontest.NewElection()
	gates := versiongatetest.NewStore(versiongatetest.StoreConfig{})
	engine := lbrecontest.New(lbrecontest.Config{})
	// The provider's side of fencing, which lbrecontest does not model:
	// every write must carry a token, never one older than a write before.
	var tokens atomic.Uint64
	fenced := lbrecon.Guard(engine, lbrecon.CheckToken(func(token uint64) error {
		for {
			seen := tokens.Load()
			if token < seen {
				return backoff.Permanent(fmt.Errorf("token %d is older than %d", token, seen))
			}
			if tokens.CompareAndSwap(seen, token) {
				return nil
			}
		}
	}))
	version, err := versiongate.ParseVersion("1.0.0")
	if err != nil {
		t.Fatal(err)
	}

	runCtx, stop := context.WithCancel(ctx)
	var g errgroup.Group
	agents := map[string]*Agent{}
	candidates := map[string]*electiontest.Candidate{}
	for i, name := range []string{"node-a", "node-b"} {
		candidates[name] = elections.NewCandidate(name)
		a, err := New(Deps{
			NodeName:          name,
			NodeIP:            fmt.Sprintf("10.0.0.%d", i+1),
			Version:           version,
			Kube:              kube,
			Namespace:         namespace,
			ConfigMap:         "outsider",
			Store:             &checkpoint.MemStore{},
			Elector:           candidates[name],
			GateStore:         gates.Conn(),
			Engine:            fenced,
			ReconcileInterval: 200 * time.Millisecond, // picks up new assignments
			SettleTime:        -1,
			LBPollInterval:    20 * time.Millisecond,
		})
		if err != nil {
			t.Fatal(err)
		}
		agents[name] = a
		g.Go(func() error { return a.Run(runCtx) })
	}
	stopped := false
	stopAll := func() {
		if stopped {
			return
		}
		stopped = true
		stop()
		if err := g.Wait(); err != nil {
			t.Errorf("Run after its context ended = %v, want nil", err)
		}
	}
	defer stopAll()

	for name, ip := range map[string]string{"node-a": "10.0.0.1", "node-b": "10.0.0.2"} {
		n, err := nodestatustest.WaitForNode(ctx, kube, name, func(n *corev1.Node) bool {
			return nodestatustest.ConditionIs(checkpoint.ConditionConfigOK, corev1.ConditionTrue, "")(n) &&
				nodestatustest.ConditionIs(ConditionReleaseAdmitted, corev1.ConditionTrue, "")(n)
		})
		if err != nil {
			t.Fatal(err)
		}
		if n.Labels["example.com/agent"] != "outsider" {
			t.Errorf("%s: registration label lost: labels %v", name, n.Labels)
		}
		if len(n.Status.Addresses) != 1 || n.Status.Addresses[0].Address != ip {
			t.Errorf("%s: addresses %v, want InternalIP %s", name, n.Status.Addresses, ip)
		}
	}
	if err := engine.WaitConverged(ctx, loadBalancer(t, settings(t, "lb-1", 80)), OwnerTag); err != nil {
		t.Fatal(err)
	}

	assign := func(js string) {
		t.Helper()
		cm.Data["settings.json"] = js
		if _, err := kube.CoreV1().ConfigMaps(namespace).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	// A new ID: the old load balancer is torn down, the new one built.
	assign(settings(t, "lb-2", 8080))
	if err := engine.WaitConverged(ctx, loadBalancer(t, settings(t, "lb-2", 8080)), OwnerTag); err != nil {
		t.Fatal(err)
	}
	if err := engine.WaitConverged(ctx, lbrecon.LoadBalancer{ID: "lb-1"}, OwnerTag); err != nil {
		t.Fatalf("old load balancer not torn down: %v", err)
	}

	// Failover: the leader loses its term; the other agent leads and
	// converges the next assignment.
	first := elections.Leader()
	if first.IsZero() {
		t.Fatal("nobody leads")
	}
	next := "node-a"
	if first.Identity == next {
		next = "node-b"
	}
	elections.Depose()
	if err := versiongatetest.WaitLeading(ctx, agents[next].Gate(), true); err != nil {
		t.Fatal(err)
	}
	second := elections.Leader()
	if second.Identity != next || second.Token <= first.Token {
		t.Fatalf("after failover leader %+v, want %s with a token above %d", second, next, first.Token)
	}
	// The new leader never had a reconciler for lb-2: it still tears it
	// down when the ID changes again.
	assign(settings(t, "lb-3", 9090))
	if err := engine.WaitConverged(ctx, loadBalancer(t, settings(t, "lb-3", 9090)), OwnerTag); err != nil {
		t.Fatal(err)
	}
	if err := engine.WaitConverged(ctx, lbrecon.LoadBalancer{ID: "lb-2"}, OwnerTag); err != nil {
		t.Fatalf("old load balancer not torn down after failover: %v", err)
	}
	if got := tokens.Load(); got != second.Token {
		t.Errorf("writes carried token %d, want the new term's %d", got, second.Token)
	}
	stopAll()
}
