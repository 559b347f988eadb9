package ccm_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/reconkit/reconkit/internal/testenv"
	"github.com/reconkit/reconkit/lbrecon"
	"github.com/reconkit/reconkit/lbrecon/ccm"
	"github.com/reconkit/reconkit/lbrecon/lbrecontest"
)

// sampler watches the provider model at every engine call: it counts
// duplicates (two objects of one kind, name and spec: one creation made
// twice) and the fewest servers each backend held.
type sampler struct {
	lbrecon.Engine
	eng *lbrecontest.Engine

	injected atomic.Int64 // creations failed by an injected fault

	mu    sync.Mutex
	dups  []string
	calls int
}

func (s *sampler) sample() {
	dups := duplicatesIn(s.eng.Objects())
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	s.dups = append(s.dups, dups...)
}

// duplicatesIn returns the pairs of objects of one kind, name and spec.
func duplicatesIn(objs []lbrecon.Object) []string {
	var out []string
	for i, a := range objs {
		for _, b := range objs[i+1:] {
			if a.Kind == b.Kind && a.Name == b.Name && lbrecon.SameSpec(a.Spec, b.Spec) {
				out = append(out, fmt.Sprintf("%v and %v", a, b))
			}
		}
	}
	return out
}

func (s *sampler) duplicates() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.dups...)
}

func (s *sampler) List(ctx context.Context, q lbrecon.Query) ([]lbrecon.Object, error) {
	defer s.sample()
	return s.Engine.List(ctx, q)
}

func (s *sampler) Get(ctx context.Context, o lbrecon.Object) (lbrecon.Object, error) {
	defer s.sample()
	return s.Engine.Get(ctx, o)
}

func (s *sampler) Create(ctx context.Context, o lbrecon.Object) (lbrecon.Object, error) {
	defer s.sample()
	got, err := s.Engine.Create(ctx, o)
	if errors.Is(err, lbrecontest.ErrInjected) {
		s.injected.Add(1)
	}
	return got, err
}

func (s *sampler) Destroy(ctx context.Context, o lbrecon.Object) error {
	defer s.sample()
	return s.Engine.Destroy(ctx, o)
}

func (s *sampler) Tag(ctx context.Context, o lbrecon.Object, tags []string) error {
	defer s.sample()
	return s.Engine.Tag(ctx, o, tags)
}

func (s *sampler) Update(ctx context.Context, cur, want lbrecon.Object) (lbrecon.Object, error) {
	defer s.sample()
	return s.Engine.(lbrecon.Updater).Update(ctx, cur, want)
}

// testMapping puts every Service on the provider's load balancer "lb-1",
// its objects named after the Service's UID, at one external address.
var testMapping = ccm.Funcs{LoadBalancerFunc: func(_ context.Context, _ string, svc *v1.Service, nodes []*v1.Node) (lbrecon.LoadBalancer, error) {
	ports, err := ccm.ServicePorts(svc)
	if err != nil {
		return lbrecon.LoadBalancer{}, err
	}
	return lbrecon.LoadBalancer{ID: "lb-1", Suffix: string(svc.UID), Ports: ports,
		Addresses: []netip.Addr{netip.MustParseAddr("192.0.2.10")}, Targets: ccm.NodeTargets(nodes)}, nil
}}

const testLag = 300 * time.Millisecond

// stepTimeout bounds each wait of the service-controller proof: each takes
// a few seconds at most; a step that fails to happen fails the test by
// then rather than at the overall deadline.
const stepTimeout = time.Minute

func readyNode(name, ip string) *v1.Node {
	return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name},
		Status: v1.NodeStatus{
			Conditions: []v1.NodeCondition{{Type: v1.NodeReady, Status: v1.ConditionTrue, Reason: "Test"}},
			Addresses:  []v1.NodeAddress{{Type: v1.NodeInternalIP, Address: ip}},
		}}
}

func createNode(t *testing.T, cs kubernetes.Interface, name, ip string) {
	t.Helper()
	ctx := t.Context()
	n, err := cs.CoreV1().Nodes().Create(ctx, readyNode(name, ip), metav1.CreateOptions{})
	require.NoError(t, err)
	n.Status = readyNode(name, ip).Status
	_, err = cs.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
	require.NoError(t, err)
}

// servers returns, per port name of the Service's load balancer, the
// addresses and ports of its servers not being deleted, as the provider
// holds them.
func serverSet(objs []lbrecon.Object, suffix string) map[string]map[string]bool {
	backends := map[string]string{} // ID -> port name
	for _, o := range objs {
		if o.Kind == lbrecon.KindBackend && o.HasTag(ccm.DefaultTagKey+"="+suffix) {
			backends[o.ID] = o.Name
		}
	}
	out := map[string]map[string]bool{}
	for _, o := range objs {
		s, ok := o.Spec.(lbrecon.ServerSpec)
		if !ok || o.Kind != lbrecon.KindServer {
			continue
		}
		if name, ok := backends[s.Backend]; ok {
			if out[name] == nil {
				out[name] = map[string]bool{}
			}
			out[name][fmt.Sprintf("%v:%d", s.Address, s.Port)] = true
		}
	}
	return out
}

// The real service controller of k8s.io/cloud-provider v0.37.1, in a
// process of its own (ccmtest, see controllerprocess_test.go), on the real
// apiserver, over a Balancer in this process on a provider model with list
// lag and asynchronous deletes. The restart is a crash: SIGKILL.
func TestServiceControllerOnTheRealAPIServer(t *testing.T) {
	start := time.Now()
	a := testenv.APIServer(t)
	cs := kubernetes.NewForConfigOrDie(a.Config())
	ctx, fail := context.WithCancelCause(t.Context())
	defer fail(nil)
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	// run runs one step; the steps build on each other, so the first
	// that fails ends the test.
	run := func(name string, step func(t *testing.T)) {
		if !t.Run(name, step) {
			t.FailNow()
		}
	}
	phase := func(name string) func() {
		begin := time.Now()
		return func() { t.Logf("%s: %v", name, time.Since(begin).Round(100*time.Millisecond)) }
	}
	t.Logf("setup: %v", time.Since(start).Round(100*time.Millisecond))
	top := t // the processes live as long as the test, not a subtest

	eng := lbrecontest.New(lbrecontest.Config{Pending: 100 * time.Millisecond, ListLag: testLag, DeleteDelay: 200 * time.Millisecond,
		Integrity: true, UniqueBinds: true})
	smp := &sampler{Engine: eng, eng: eng}
	// waitFor waits for cond on the provider model, failing at once when
	// it holds a duplicate; when the controller process died, the failure
	// says why.
	waitFor := func(t *testing.T, cond func([]lbrecon.Object) bool, msgAndArgs ...any) {
		t.Helper()
		var dups []string
		ctx, cancel := context.WithTimeout(ctx, stepTimeout)
		defer cancel()
		err := eng.WaitFor(ctx, func(objs []lbrecon.Object) bool {
			dups = duplicatesIn(objs)
			return len(dups) > 0 || cond(objs)
		})
		if err != nil {
			require.NoError(t, fmt.Errorf("%w (cause: %w)", err, context.Cause(ctx)), msgAndArgs...)
		}
		require.Empty(t, dups, "duplicates at the provider")
	}
	// Foreign objects on the same load balancer: another Service's (its
	// tag), an operator's (untagged) and another tool's (another key).
	foreignBackend := eng.Put(lbrecon.Object{Kind: lbrecon.KindBackend, Name: "http.other", Tags: []string{ccm.DefaultTagKey + "=other-uid"},
		Spec: lbrecon.BackendSpec{LoadBalancer: "lb-1"}})
	foreign := []lbrecon.Object{foreignBackend,
		eng.Put(lbrecon.Object{Kind: lbrecon.KindServer, Name: "n1.http.other", Tags: []string{ccm.DefaultTagKey + "=other-uid"},
			Spec: lbrecon.ServerSpec{Backend: foreignBackend.ID, Address: netip.MustParseAddr("10.0.0.1"), Port: 30000}}),
		eng.Put(lbrecon.Object{Kind: lbrecon.KindBackend, Name: "manual", Spec: lbrecon.BackendSpec{LoadBalancer: "lb-1"}}),
		eng.Put(lbrecon.Object{Kind: lbrecon.KindBackend, Name: "tool", Tags: []string{"managed-by=tool"}, Spec: lbrecon.BackendSpec{LoadBalancer: "lb-1"}}),
	}
	fence := lbrecon.NewFence("provider", 0, "")

	createNode(t, cs, "n1", "10.0.0.1")
	createNode(t, cs, "n2", "10.0.0.2")
	proc := startController(t, a.Config(), cs, smp, fence, 1, fail)

	svc, err := cs.CoreV1().Services("default").Create(ctx, &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer, Selector: map[string]string{"app": "web"},
			Ports: []v1.ServicePort{
				{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: v1.ProtocolTCP},
				{Name: "https", Port: 443, TargetPort: intstr.FromInt32(8443), Protocol: v1.ProtocolTCP},
			}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	uid := string(svc.UID)
	tag := ccm.DefaultTagKey + "=" + uid
	want := func(ips ...string) func([]lbrecon.Object) bool {
		return func(objs []lbrecon.Object) bool {
			got := serverSet(objs, uid)
			cur, err := cs.CoreV1().Services("default").Get(ctx, "web", metav1.GetOptions{})
			if err != nil || len(got) != len(cur.Spec.Ports) {
				return false
			}
			for _, p := range cur.Spec.Ports {
				set := got[p.Name+"."+uid]
				if len(set) != len(ips) {
					return false
				}
				for _, ip := range ips {
					if !set[fmt.Sprintf("%s:%d", ip, p.NodePort)] {
						return false
					}
				}
			}
			return true
		}
	}

	run("ingress", func(t *testing.T) {
		defer phase("ingress")()
		waitFor(t, want("10.0.0.1", "10.0.0.2"))
		require.Eventually(t, func() bool {
			cur, err := cs.CoreV1().Services("default").Get(ctx, "web", metav1.GetOptions{})
			return err == nil && len(cur.Status.LoadBalancer.Ingress) == 1 && cur.Status.LoadBalancer.Ingress[0].IP == "192.0.2.10"
		}, time.Minute, 20*time.Millisecond, "status.loadBalancer.ingress")
	})

	run("nodes", func(t *testing.T) {
		defer phase("nodes")()
		// The node sync's UpdateLoadBalancer fails part-way: one of the
		// new node's servers is not created; the controller queues the
		// Service again (its node sync's retry), and the node is served
		// all the same. (balancer_test.go checks that the error is not
		// masked.)
		eng.FailCreate(func(o lbrecon.Object) bool {
			s, ok := o.Spec.(lbrecon.ServerSpec)
			return ok && s.Address == netip.MustParseAddr("10.0.0.3")
		}, 1, nil)
		createNode(t, cs, "n3", "10.0.0.3")
		waitFor(t, want("10.0.0.1", "10.0.0.2", "10.0.0.3"), "a node added")
		require.Equal(t, int64(1), smp.injected.Load(), "the injected failure happened")
		require.NoError(t, cs.CoreV1().Nodes().Delete(ctx, "n1", metav1.DeleteOptions{}))
		waitFor(t, want("10.0.0.2", "10.0.0.3"), "a node removed")
	})

	run("port change keeps min(old, new) servers", func(t *testing.T) {
		defer phase("port change keeps min(old, new) servers")()
		eng.ResetLow()
		cur, err := cs.CoreV1().Services("default").Get(ctx, "web", metav1.GetOptions{})
		require.NoError(t, err)
		for i := range cur.Spec.Ports {
			cur.Spec.Ports[i].NodePort = int32(32000 + i)
		}
		_, err = cs.CoreV1().Services("default").Update(ctx, cur, metav1.UpdateOptions{})
		require.NoError(t, err)
		waitFor(t, want("10.0.0.2", "10.0.0.3"))
		for id, n := range eng.Low(lbrecon.KindServer) {
			if id != foreignBackend.ID {
				require.GreaterOrEqual(t, n, 2, "backend %s held fewer servers than before and after the change", id)
			}
		}
	})

	run("restart mid-change", func(t *testing.T) {
		defer phase("restart mid-change")()
		cur, err := cs.CoreV1().Services("default").Get(ctx, "web", metav1.GetOptions{})
		require.NoError(t, err)
		cur.Spec.Ports = append(cur.Spec.Ports, v1.ServicePort{Name: "extra", Port: 8081, TargetPort: intstr.FromInt32(8081), Protocol: v1.ProtocolTCP})
		_, err = cs.CoreV1().Services("default").Update(ctx, cur, metav1.UpdateOptions{})
		require.NoError(t, err)
		// Kill the process as soon as it sent the first creation of the
		// change, while the listing does not show it yet.
		waitFor(t, func(objs []lbrecon.Object) bool {
			for _, o := range objs {
				if o.Kind == lbrecon.KindBackend && o.Name == "extra."+uid {
					return true
				}
			}
			return false
		})
		proc.kill(t)
		proc = startController(top, a.Config(), cs, smp, fence, 2, fail)
		waitFor(t, want("10.0.0.2", "10.0.0.3"))
		require.Empty(t, smp.duplicates())
	})

	run("delete", func(t *testing.T) {
		defer phase("delete")()
		require.NoError(t, cs.CoreV1().Services("default").Delete(ctx, "web", metav1.DeleteOptions{}))
		require.Eventually(t, func() bool {
			_, err := cs.CoreV1().Services("default").Get(ctx, "web", metav1.GetOptions{})
			return apierrors.IsNotFound(err)
		}, 3*time.Minute, 20*time.Millisecond, "the finalizer removed once the load balancer is gone")
		// The service controller wraps a deletion's error with %v, so it
		// backs a RetryError off exponentially from 5 s; by default each
		// call makes one teardown pass (servers, then binds and
		// frontends, then backends, each once the deletes show), holding
		// no worker, so the teardown takes a few calls. The last one
		// waits for the confirmation of its destructions (the lag after
		// the listing that showed nothing left) rather than leave it to
		// a call of its own, which would come after the next doubling:
		// 5 calls in some 70 s. Without that wait it took 7 (past 5
		// minutes); with it, but the rest's teardown made only once the
		// load balancer's was done (its own lag then still to wait), 6
		// (150 s).
		t.Logf("EnsureLoadBalancerDeleted calls: %d", proc.Calls().Delete)
		require.LessOrEqual(t, proc.Calls().Delete, int64(5), "EnsureLoadBalancerDeleted calls")
		var left []lbrecon.Object
		for _, o := range eng.Objects() {
			if o.HasTag(tag) {
				left = append(left, o)
			}
		}
		require.Empty(t, left, "everything the Service owned is gone")
		for _, f := range foreign {
			got, err := eng.Get(ctx, f)
			require.NoError(t, err, "foreign %v", f)
			require.Equal(t, f.Tags, got.Tags)
		}
	})
	require.Empty(t, smp.duplicates(), "duplicates seen at an engine call")
	t.Logf("engine calls sampled: %d; load-balancer calls after the restart: %d, of them EnsureLoadBalancerDeleted: %d; total %v",
		smp.calls, proc.Calls().Total(), proc.Calls().Delete, time.Since(start).Round(100*time.Millisecond))
}
