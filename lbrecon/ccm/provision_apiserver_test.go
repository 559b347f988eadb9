package ccm_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/reconkit/reconkit/internal/testenv"
	"github.com/reconkit/reconkit/lbrecon"
	"github.com/reconkit/reconkit/lbrecon/ccm"
	"github.com/reconkit/reconkit/lbrecon/ccm/ccmtest"
	"github.com/reconkit/reconkit/lbrecon/lbrecontest"
)

// The provisioned path (lbrecon.LoadBalancer.Provision) under the real
// service controller of k8s.io/cloud-provider (ccmtest) on the real
// apiserver: the plan creates each Service's load balancer on the
// ELB-shaped model, whose address and DNS name the provider assigns a
// while after the load balancer is ok.

// provWant is what the Service's status must say for the provider's
// load-balancer object lb: its assigned address and DNS name, and nothing
// while it has none.
func provWant(lb lbrecon.Object) []v1.LoadBalancerIngress {
	st, ok := lbrecon.StatusOfObject(lb)
	if !ok {
		return nil
	}
	in := v1.LoadBalancerIngress{Hostname: st.Hostname}
	if st.Address.IsValid() {
		in.IP = st.Address.String()
	}
	return []v1.LoadBalancerIngress{in}
}

// sameIngress reports whether got is want, comparing each ingress by its
// IP and hostname alone (the apiserver defaults ipMode).
func sameIngress(got, want []v1.LoadBalancerIngress) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if got[i].IP != want[i].IP || got[i].Hostname != want[i].Hostname {
			return false
		}
	}
	return true
}

// provLB returns the provider's load-balancer object named name, as the
// provider holds it now.
func provLB(eng *lbrecontest.Engine, name string) (lbrecon.Object, bool) {
	for _, o := range eng.Objects() {
		if s, ok := o.Spec.(lbrecon.LoadBalancerSpec); ok && o.Kind == lbrecon.KindLoadBalancer && s.Name == name {
			return o, true
		}
	}
	return lbrecon.Object{}, false
}

// publishWatch is the Balancer the controller calls, checking at every
// EnsureLoadBalancer that returned a status that it is exactly what the
// provider assigned at that moment (nothing returned before), and counting
// those successes.
type publishWatch struct {
	*ccm.Balancer
	eng *lbrecontest.Engine

	ok      atomic.Int64 // EnsureLoadBalancer calls that returned a status
	localOK atomic.Int64 // of them, those for externalTrafficPolicy Local
	mu      sync.Mutex
	bad     []string
}

func (p *publishWatch) EnsureLoadBalancer(ctx context.Context, clusterName string, svc *v1.Service, nodes []*v1.Node) (*v1.LoadBalancerStatus, error) {
	st, err := p.Balancer.EnsureLoadBalancer(ctx, clusterName, svc, nodes)
	if err != nil {
		return st, err
	}
	p.ok.Add(1)
	if svc.Spec.ExternalTrafficPolicy == v1.ServiceExternalTrafficPolicyLocal {
		p.localOK.Add(1)
	}
	lb, found := provLB(p.eng, "a"+string(svc.UID))
	var got []v1.LoadBalancerIngress
	if st != nil {
		got = st.Ingress
	}
	if want := provWant(lb); !found || want == nil || !sameIngress(got, want) {
		p.mu.Lock()
		p.bad = append(p.bad, fmt.Sprintf("EnsureLoadBalancer returned %v while the provider held %v (found %v)", got, lb, found))
		p.mu.Unlock()
	}
	return st, nil
}

func (p *publishWatch) violations() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.bad...)
}

// orderWatch is the Balancer's engine: when it is asked to destroy a
// load-balancer object, every other object at the provider must be gone
// already (children before their load balancer).
type orderWatch struct {
	lbrecon.Engine
	eng *lbrecontest.Engine

	mu  sync.Mutex
	bad []string
}

func (o *orderWatch) Destroy(ctx context.Context, obj lbrecon.Object) error {
	if obj.Kind == lbrecon.KindLoadBalancer {
		for _, c := range o.eng.Objects() {
			if c.Key() != obj.Key() {
				o.mu.Lock()
				o.bad = append(o.bad, fmt.Sprintf("load balancer %s destroyed while %v is at the provider", obj.ID, c))
				o.mu.Unlock()
			}
		}
	}
	return o.Engine.Destroy(ctx, obj)
}

func (o *orderWatch) Update(ctx context.Context, cur, want lbrecon.Object) (lbrecon.Object, error) {
	return o.Engine.(lbrecon.Updater).Update(ctx, cur, want)
}

func (o *orderWatch) violations() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]string(nil), o.bad...)
}

func TestProvisionedServiceUnderTheRealController(t *testing.T) {
	a := testenv.APIServer(t)
	cs := kubernetes.NewForConfigOrDie(a.Config())
	ctx, fail := context.WithCancelCause(t.Context())
	defer fail(nil)
	ctx, cancel := context.WithTimeout(ctx, 12*time.Minute)
	defer cancel()
	svcs := cs.CoreV1().Services("default")

	eng, order, pub, ctrl := startProvisioned(t, a, cs, lbrecontest.ELB, provisionMapping, fail)

	// Every version of the Service the apiserver holds: an ingress that
	// differs from the last one must be exactly what the provider assigned
	// by then.
	w, err := svcs.Watch(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", "web").String()})
	require.NoError(t, err)
	var (
		seenMu    sync.Mutex
		seenBad   []string
		published []v1.LoadBalancerIngress // the last ingress seen
		watchDone = make(chan struct{})
	)
	go func() {
		defer close(watchDone)
		for ev := range w.ResultChan() {
			svc, ok := ev.Object.(*v1.Service)
			if !ok || ev.Type == watch.Deleted {
				continue
			}
			in := svc.Status.LoadBalancer.Ingress
			lb, found := provLB(eng, "a"+string(svc.UID))
			seenMu.Lock()
			// A status unchanged since the last version is no new
			// publication: an update of the Service carries its old
			// status, whatever the provider holds by then.
			if want := provWant(lb); len(in) > 0 && !sameIngress(in, published) && (!found || want == nil || !sameIngress(in, want)) {
				seenBad = append(seenBad, fmt.Sprintf("status.loadBalancer.ingress %v published while the provider held %v (found %v)", in, lb, found))
			}
			published = in
			seenMu.Unlock()
		}
	}()
	defer func() { w.Stop(); <-watchDone }()
	checkPublished := func(t *testing.T) {
		t.Helper()
		seenMu.Lock()
		defer seenMu.Unlock()
		require.Empty(t, seenBad, "published other than what the provider assigned")
		require.Empty(t, pub.violations(), "EnsureLoadBalancer returned other than what the provider assigned")
	}

	eventually := func(t *testing.T, cond func() bool, what string) {
		t.Helper()
		bad := func() []string {
			seenMu.Lock()
			defer seenMu.Unlock()
			return append(append([]string(nil), seenBad...), pub.violations()...)
		}
		waitFor(t, ctx, eng, cleanupTimeout, bad, what, func() error {
			if cond() {
				return nil
			}
			return errors.New("not yet")
		})
	}
	current := func(t *testing.T) *v1.Service {
		t.Helper()
		cur, err := svcs.Get(ctx, "web", metav1.GetOptions{})
		require.NoError(t, err)
		return cur
	}
	// ingressIs waits until the Service's status is exactly what the
	// provider's load balancer named name was assigned, and the watch
	// above has judged that publication too, and returns it. The watch
	// judges each version against the provider as it is when the event
	// arrives, which may be after the GET here: a step that changes the
	// provider next (deletes the load balancer) must not come between.
	ingressIs := func(t *testing.T, name string) []v1.LoadBalancerIngress {
		t.Helper()
		var want []v1.LoadBalancerIngress
		eventually(t, func() bool {
			lb, found := provLB(eng, name)
			want = provWant(lb)
			cur, err := svcs.Get(ctx, "web", metav1.GetOptions{})
			if !found || want == nil || err != nil || !sameIngress(cur.Status.LoadBalancer.Ingress, want) {
				return false
			}
			seenMu.Lock()
			defer seenMu.Unlock()
			return sameIngress(published, want)
		}, "status.loadBalancer.ingress is the provider's assigned address")
		return want
	}
	byKey := func() map[lbrecon.Key]lbrecon.Object {
		out := map[lbrecon.Key]lbrecon.Object{}
		for _, o := range eng.Objects() {
			out[o.Key()] = o
		}
		return out
	}
	run := stopAtFirstFailure(t)
	svc := createWeb(t, ctx, svcs)
	name := "a" + string(svc.UID)

	run("the assigned address is published once assigned, nothing before", func(t *testing.T) {
		want := ingressIs(t, name)
		require.Equal(t, name+".lb.example", want[0].Hostname)
		require.NotEmpty(t, want[0].IP)
		// The controller was told to retry while the address was not
		// known: an EnsureLoadBalancer before the one that published.
		require.Greater(t, ctrl.Calls().Ensure, pub.ok.Load(), "no RetryError before the address was assigned")
		require.Len(t, eng.Objects(), 5) // load balancer, pool, listener, two members
		checkPublished(t)
	})

	run("deleted at the provider: a Service change recreates it and publishes the new address", func(t *testing.T) {
		old, ok := provLB(eng, name)
		require.True(t, ok)
		oldIn := provWant(old)
		require.Equal(t, 5, eng.DeleteTree(old.Key()))
		require.Empty(t, eng.Objects())
		// The controller syncs a Service again when it changes (its
		// needsUpdate compares annotations); a node change only calls
		// UpdateLoadBalancer, which cannot publish a status.
		cur := current(t)
		if cur.Annotations == nil {
			cur.Annotations = map[string]string{}
		}
		cur.Annotations["example.com/touched"] = "1"
		_, err := svcs.Update(ctx, cur, metav1.UpdateOptions{})
		require.NoError(t, err)
		want := ingressIs(t, name)
		lb, ok := provLB(eng, name)
		require.True(t, ok)
		require.NotEqual(t, old.ID, lb.ID, "a new load balancer")
		require.NotEqual(t, oldIn[0].IP, want[0].IP, "the new address")
		eventually(t, func() bool { return len(eng.Objects()) == 5 }, "the load balancer and its children recreated")
		checkPublished(t)
	})

	run("Cluster to Local adds the health check alone", func(t *testing.T) {
		before := byKey()
		require.Len(t, before, 5)
		cur := current(t)
		cur.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyLocal
		cur, err := svcs.Update(ctx, cur, metav1.UpdateOptions{})
		require.NoError(t, err)
		hc := cur.Spec.HealthCheckNodePort
		require.Positive(t, hc, "the apiserver allocated a healthCheckNodePort")
		// The sync of the change is over once an EnsureLoadBalancer of
		// the Local Service returned a status.
		eventually(t, func() bool { return pub.localOK.Load() > 0 }, "the change synced")
		after := byKey()
		checks := 0
		for k, o := range after {
			if o.Kind == lbrecon.KindHealthCheck {
				checks++
				s := o.Spec.(lbrecon.HealthCheckSpec)
				require.Equal(t, uint16(hc), s.Port)
				require.Equal(t, "/healthz", s.Path)
				continue
			}
			require.Equal(t, before[k], o, "an object changed or was rebuilt")
		}
		require.Equal(t, 1, checks, "one health check")
		require.Len(t, after, len(before)+1, "nothing but the health check added")
		ingressIs(t, name)
		checkPublished(t)
	})

	run("deleted: nothing left at the provider, children first, then the finalizer goes", func(t *testing.T) {
		require.Contains(t, current(t).Finalizers, lbFinalizer)
		require.NoError(t, svcs.Delete(ctx, "web", metav1.DeleteOptions{}))
		eventually(t, func() bool {
			_, err := svcs.Get(ctx, "web", metav1.GetOptions{})
			return apierrors.IsNotFound(err)
		}, "the Service gone (its finalizer removed)")
		require.Empty(t, eng.Objects(), "nothing left at the provider once the finalizer went")
		require.Empty(t, order.violations(), "children destroyed before their load balancer")
		checkPublished(t)
	})
	seenMu.Lock()
	t.Logf("last published: %v; load-balancer calls: %+v; provider requests: %d", published, ctrl.Calls(), eng.Requests())
	seenMu.Unlock()
}

// stopAtFirstFailure returns run, which runs a named step of t and stops
// t at the first step that fails: the later steps build on it.
func stopAtFirstFailure(t *testing.T) func(name string, step func(t *testing.T)) {
	return func(name string, step func(t *testing.T)) {
		if !t.Run(name, step) {
			t.FailNow()
		}
	}
}

// createWeb creates the Service "web" of the provisioned tests: type
// LoadBalancer, one TCP port 80, externalTrafficPolicy Cluster.
func createWeb(t *testing.T, ctx context.Context, svcs corev1client.ServiceInterface) *v1.Service {
	t.Helper()
	svc, err := svcs.Create(ctx, &v1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
		Spec: v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer, Selector: map[string]string{"app": "web"},
			ExternalTrafficPolicy: v1.ServiceExternalTrafficPolicyCluster,
			Ports:                 []v1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: v1.ProtocolTCP}}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	return svc
}

// waitFor waits up to within for cond to hold (a nil error), looking every
// 20 ms; it fails the test at once when bad reports a wrong publication or
// ctx ends, and at the deadline with cond's last error and what the
// provider holds.
func waitFor(t *testing.T, ctx context.Context, eng *lbrecontest.Engine, within time.Duration, bad func() []string, what string, cond func() error) {
	t.Helper()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	deadline := time.NewTimer(within)
	defer deadline.Stop()
	for {
		err := cond()
		if err == nil {
			return
		}
		if b := bad(); len(b) > 0 {
			t.Fatalf("%s: published other than what the provider assigned: %v", what, b)
		}
		select {
		case <-tick.C:
		case <-deadline.C:
			t.Fatalf("%s: not within %v: %v; provider: %v", what, within, err, eng.Objects())
		case <-ctx.Done():
			t.Fatalf("%s: %v", what, context.Cause(ctx))
		}
	}
}

// startProvisioned starts a Balancer on a provider of the given shape
// (lbrecontest.ELB or HAProxy) with short delays on real time, two Nodes,
// and the real service controller calling it; a failure of the controller
// ends fail's context. Every wait of the tests that use it is a condition
// with a deadline, so the machine's load cannot fail them.
func startProvisioned(t *testing.T, a *testenv.APIServerInstance, cs kubernetes.Interface,
	shape func(lbrecontest.Config) lbrecontest.Config, mapping ccm.Mapping, fail context.CancelCauseFunc,
) (*lbrecontest.Engine, *orderWatch, *publishWatch, *ccmtest.Controller) {
	t.Helper()
	eng := lbrecontest.New(shape(lbrecontest.Config{Pending: 100 * time.Millisecond, ListLag: 100 * time.Millisecond,
		DeclareListLag: true, DeleteDelay: 200 * time.Millisecond, VIPDelay: 300 * time.Millisecond}))
	order := &orderWatch{Engine: eng, eng: eng}
	b, err := ccm.New(ccm.Config{Engine: order, Mapping: mapping,
		Token:   func(context.Context) (uint64, error) { return 1, nil },
		Journal: ccm.NewConfigMapJournal(cs.CoreV1(), ccm.ConfigMapJournalOptions{}),
		Reconciler: lbrecon.Config{PollInterval: 50 * time.Millisecond, MaxPollInterval: 500 * time.Millisecond,
			CallTimeout: 5 * time.Second}})
	require.NoError(t, err)
	pub := &publishWatch{Balancer: b, eng: eng}

	createNode(t, cs, "n1", "10.0.0.1")
	createNode(t, cs, "n2", "10.0.0.2")
	ctrl, err := ccmtest.Start(t.Context(), ccmtest.Config{REST: a.Config(), Balancer: pub, ClusterName: "test-cluster", Workers: 2})
	require.NoError(t, err)
	go func() {
		<-ctrl.Done()
		if err := ctrl.Err(); err != nil {
			fail(fmt.Errorf("the service controller: %w", err))
		}
	}()
	t.Cleanup(func() {
		require.NoError(t, ctrl.Kill())
		if t.Failed() {
			t.Logf("the service controller's output, its tail:\n%s", lastLines(ctrl.Log(), 60))
		}
	})
	return eng, order, pub, ctrl
}
