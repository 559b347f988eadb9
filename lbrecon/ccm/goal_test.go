package ccm_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cloud-provider/api"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/reconkit/reconkit/kubefake"
	"github.com/reconkit/reconkit/lbrecon"
	"github.com/reconkit/reconkit/lbrecon/ccm"
	"github.com/reconkit/reconkit/lbrecon/lbrecontest"
)

// The goal at the ccm level: a Service's life driven through the four
// calls the service controller makes (EnsureLoadBalancer, UpdateLoadBalancer,
// GetLoadBalancer, EnsureLoadBalancerDeleted, in the controller's order),
// on a provider whose listings come from read replicas (lagging up to 3 s,
// going backwards, one create answer in seven lost and shown late) with a
// fence, by cloud-controller-manager processes that crash at a random
// write (lbrecontest.Crasher) or fail over to a new term while the deposed
// leader goes on calling for a while, with the ConfigMap journal on
// kubefake. The Balancer raises the provider's fence at its term's first
// call, before it reads the journal: a fence that learned the new term
// only from the new leader's first write let the deposed leader write
// meanwhile, unseen by the new leader's reconciler, which had read the
// journal before (duplicates in 14 runs of 100, and passes stuck on them,
// before the Balancer did so). The Service is created, its ports change, its
// externalTrafficPolicy goes Local and back, it goes to ClusterIP and back
// to LoadBalancer (new node ports), and is deleted. Every call is judged
// on the provider's true state: no duplicate at any time, and nothing of
// the Service left once the deletion reported the load balancer gone.

type ccmGoalOutcome struct {
	crashes, failovers, deposedCalls, calls int
	dups, leaked, stuck                     int
}

const goalLag = 3 * time.Second

// ccmGoalAdversity switches the run's adversities; the goal has them all.
type ccmGoalAdversity struct {
	crashes, failovers, lostAnswers bool
}

var allAdversities = ccmGoalAdversity{crashes: true, failovers: true, lostAnswers: true}

func ccmGoalRun(t *testing.T, seed uint64, adv ccmGoalAdversity) ccmGoalOutcome {
	var out ccmGoalOutcome
	ctx := t.Context()
	rng := rand.New(rand.NewPCG(seed, 35))
	clk := clocktesting.NewFakeClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	eng := lbrecontest.New(lbrecontest.Config{Clock: clk, Pending: time.Second, ReplicaLag: goalLag, DeclareListLag: true,
		Seed: seed, DeleteDelay: 2 * time.Second, Integrity: true, UniqueBinds: true, Fence: true})
	if adv.lostAnswers {
		eng.LoseCreateAnswers(7)
	}
	cr := lbrecontest.NewCrasher(eng)
	fence := lbrecon.NewFence("provider", 0, "")
	kube := kubefake.NewClientset()

	svc := &v1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web", UID: types.UID(fmt.Sprintf("uid-%d", seed))},
		Spec: v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer, ExternalTrafficPolicy: v1.ServiceExternalTrafficPolicyCluster,
			Ports: []v1.ServicePort{{Name: "http", Port: 80, NodePort: 30080}, {Name: "https", Port: 443, NodePort: 30443}}}}
	_, err := kube.CoreV1().Services("shop").Create(ctx, svc, metav1.CreateOptions{})
	require.NoError(t, err)
	node := func(name, ip string) *v1.Node {
		return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name},
			Status: v1.NodeStatus{Addresses: []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: ip}}}}
	}
	nodes := []*v1.Node{node("n1", "10.0.0.1"), node("n2", "10.0.0.2")}

	// A process: a Balancer with no memory and its term's token.
	token := uint64(0)
	newProcess := func() *ccm.Balancer {
		token++
		term := token
		b, err := ccm.New(ccm.Config{Engine: cr, Mapping: testMapping, Admit: fence.Admit,
			Token:      func(context.Context) (uint64, error) { return term, nil },
			Journal:    ccm.NewConfigMapJournal(kube.CoreV1(), ccm.ConfigMapJournalOptions{}),
			Reconciler: lbrecon.Config{Clock: clk, ListLag: goalLag},
			// The fake clock is stepped only between calls: no call may
			// wait on it, not even for a confirmation (confirm_test.go
			// tests that wait).
			TeardownWait: -1})
		require.NoError(t, err)
		return b
	}
	leader := newProcess()
	var deposed *ccm.Balancer // the previous leader, still calling for a while
	deposedLeft := 0

	seen := map[string]bool{} // duplicate pairs already counted
	check := func() {
		for _, d := range duplicatesIn(eng.Objects()) {
			if !seen[d] {
				seen[d] = true
				out.dups++
				t.Errorf("seed %d: duplicate: %s", seed, d)
			}
		}
	}
	// disrupt, before a call, may arm a crash at one of the next writes
	// or fail over to a new term, the old leader going on for a few calls.
	disrupt := func() {
		select {
		case <-cr.Crashed():
			out.crashes++
			cr.Restart()
			leader, deposed, deposedLeft = newProcess(), nil, 0
			return
		default:
		}
		switch rng.IntN(12) {
		case 0:
			if adv.crashes {
				cr.Arm(1+rng.IntN(3), rng.IntN(2) == 0)
			}
		case 1:
			if !adv.failovers {
				return
			}
			out.failovers++
			deposed, deposedLeft = leader, 1+rng.IntN(3)
			leader = newProcess()
		}
	}
	// call makes one call of the leader's, or, while one is left, of
	// the deposed leader's, whose writes the fence refuses.
	call := func(f func(b *ccm.Balancer) error) error {
		disrupt()
		b := leader
		if deposed != nil && deposedLeft > 0 && rng.IntN(2) == 0 {
			b, deposedLeft = deposed, deposedLeft-1
			out.deposedCalls++
			_ = f(b)
			check()
			return errors.New("the deposed leader's call")
		}
		out.calls++
		err := f(b)
		check()
		return err
	}
	// wait steps the clock as the service controller would wait after
	// err: a RetryError's delay, otherwise its backoff (a second here).
	wait := func(err error) {
		var re *api.RetryError
		if errors.As(err, &re) {
			clk.Step(max(re.RetryAfter(), 10*time.Millisecond))
			return
		}
		clk.Step(time.Second)
	}
	const maxCalls = 400
	ensure := func(s *v1.Service) {
		for i := 0; ; i++ {
			if i == maxCalls {
				out.stuck++
				t.Errorf("seed %d: EnsureLoadBalancer did not converge in %d calls", seed, maxCalls)
				return
			}
			var err error
			if rng.IntN(8) == 0 { // the node sync
				err = call(func(b *ccm.Balancer) error { return b.UpdateLoadBalancer(ctx, "c", s, nodes) })
				if err == nil {
					continue // the node sync's success says nothing of the Service's sync
				}
			} else {
				var st *v1.LoadBalancerStatus
				err = call(func(b *ccm.Balancer) error {
					var err error
					st, err = b.EnsureLoadBalancer(ctx, "c", s, nodes)
					return err
				})
				if err == nil && st != nil && len(st.Ingress) == 1 {
					return
				}
			}
			wait(err)
		}
	}
	// cleanup is the controller's deletion: GetLoadBalancer, then
	// EnsureLoadBalancerDeleted while it exists, then the finalizer goes.
	cleanup := func(s *v1.Service) {
		for i := 0; ; i++ {
			if i == maxCalls {
				out.stuck++
				t.Errorf("seed %d: the deletion did not complete in %d calls", seed, maxCalls)
				return
			}
			var exists bool
			err := call(func(b *ccm.Balancer) error {
				var err error
				_, exists, err = b.GetLoadBalancer(ctx, "c", s)
				return err
			})
			if err == nil && !exists {
				return
			}
			if err == nil {
				err = call(func(b *ccm.Balancer) error { return b.EnsureLoadBalancerDeleted(ctx, "c", s) })
			}
			wait(err)
		}
	}

	s := svc.DeepCopy()
	ensure(s)
	s.Spec.Ports[0].NodePort = 31080 // a port change
	s.Spec.Ports = append(s.Spec.Ports, v1.ServicePort{Name: "alt", Port: 8080, NodePort: 30808})
	nodes = append(nodes, node("n3", "10.0.0.3"))
	ensure(s)
	s.Spec.ExternalTrafficPolicy, s.Spec.HealthCheckNodePort = v1.ServiceExternalTrafficPolicyLocal, 32000
	ensure(s)
	s.Spec.ExternalTrafficPolicy, s.Spec.HealthCheckNodePort = v1.ServiceExternalTrafficPolicyCluster, 0
	nodes = nodes[1:]
	ensure(s)
	// LoadBalancer -> ClusterIP: the apiserver drops the node ports.
	s.Spec.Type = v1.ServiceTypeClusterIP
	for i := range s.Spec.Ports {
		s.Spec.Ports[i].NodePort = 0
	}
	cleanup(s)
	if left := owned(eng, string(s.UID)); len(left) > 0 {
		out.leaked += len(left)
		t.Errorf("seed %d: after the change to ClusterIP: %d objects left: %v", seed, len(left), left)
	}
	// ... and back, with new node ports.
	s.Spec.Type = v1.ServiceTypeLoadBalancer
	for i := range s.Spec.Ports {
		s.Spec.Ports[i].NodePort = int32(30100 + i)
	}
	ensure(s)
	now := metav1.NewTime(clk.Now())
	s.DeletionTimestamp = &now
	cleanup(s)
	clk.Step(2 * goalLag) // past the lag: nothing late shows up
	check()
	if left := owned(eng, string(s.UID)); len(left) > 0 {
		out.leaked += len(left)
		t.Errorf("seed %d: after the deletion: %d objects left: %v", seed, len(left), left)
	}
	return out
}

func TestGoalServiceLifecycleThroughCrashesAndFailovers(t *testing.T) {
	var total ccmGoalOutcome
	runs := 100
	if testing.Short() {
		runs = 30
	}
	for seed := range uint64(runs) {
		var o ccmGoalOutcome
		t.Run(fmt.Sprint(seed), func(t *testing.T) { o = ccmGoalRun(t, seed, allAdversities) })
		total.crashes += o.crashes
		total.failovers += o.failovers
		total.deposedCalls += o.deposedCalls
		total.calls += o.calls
		total.dups += o.dups
		total.leaked += o.leaked
		total.stuck += o.stuck
	}
	t.Logf("%d runs: %d calls, %d crashes, %d failovers (%d calls of a deposed leader), %d duplicates, %d leaked, %d stuck",
		runs, total.calls, total.crashes, total.failovers, total.deposedCalls, total.dups, total.leaked, total.stuck)
	// The armed crashes came (each counted when it fired at its write).
	require.Positive(t, total.crashes, "no armed crash came")
	require.Zero(t, total.dups)
	require.Zero(t, total.leaked)
	require.Zero(t, total.stuck)
}
