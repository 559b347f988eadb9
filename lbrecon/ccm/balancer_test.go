package ccm_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cloud-provider/api"

	"github.com/reconkit/reconkit/backoff"
	"github.com/reconkit/reconkit/lbrecon"
	"github.com/reconkit/reconkit/lbrecon/ccm"
	"github.com/reconkit/reconkit/lbrecon/lbrecontest"
)

func service(uid string) *v1.Service {
	return &v1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: types.UID(uid)},
		Spec: v1.ServiceSpec{Type: v1.ServiceTypeLoadBalancer, Ports: []v1.ServicePort{
			{Name: "http", Port: 80, NodePort: 30080, Protocol: v1.ProtocolTCP},
			{Name: "https", Port: 443, NodePort: 30443, Protocol: v1.ProtocolTCP},
		}}}
}

func nodes(n int) []*v1.Node {
	out := make([]*v1.Node, n)
	for i := range out {
		out[i] = readyNode(fmt.Sprintf("n%d", i+1), fmt.Sprintf("10.0.0.%d", i+1))
	}
	return out
}

func newBalancer(t *testing.T, eng lbrecon.Engine, mod func(*ccm.Config)) *ccm.Balancer {
	t.Helper()
	cfg := ccm.Config{Engine: eng, Mapping: testMapping, Journal: &ccm.MemoryJournal{},
		Token:      func(context.Context) (uint64, error) { return 1, nil },
		Reconciler: lbrecon.Config{ListLag: time.Second}}
	if mod != nil {
		mod(&cfg)
	}
	b, err := ccm.New(cfg)
	require.NoError(t, err)
	return b
}

// ensure calls EnsureLoadBalancer as the service controller does: again
// after a RetryError's delay, until it returns a status or another error.
func ensure(t *testing.T, b *ccm.Balancer, svc *v1.Service, ns []*v1.Node) (*v1.LoadBalancerStatus, int, error) {
	t.Helper()
	for calls := 1; calls <= 200; calls++ {
		st, err := b.EnsureLoadBalancer(t.Context(), "c", svc, ns)
		var re *api.RetryError
		if !errors.As(err, &re) {
			return st, calls, err
		}
		require.Nil(t, st)
		require.Positive(t, re.RetryAfter(), "a RetryError always waits")
		<-time.After(re.RetryAfter())
	}
	t.Fatal("not converged after 200 calls")
	return nil, 0, nil
}

func TestEnsureReturnsRetryErrorUntilConverged(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		eng := lbrecontest.New(lbrecontest.Config{Latency: 10 * time.Millisecond, Pending: time.Second, ListLag: time.Second,
			DeleteDelay: time.Second, Integrity: true})
		b := newBalancer(t, eng, nil)
		svc := service("uid-1")
		st, calls, err := ensure(t, b, svc, nodes(2))
		require.NoError(t, err)
		require.Equal(t, []v1.LoadBalancerIngress{{IP: "192.0.2.10"}}, st.Ingress)
		require.Greater(t, calls, 1, "pending objects made it call again")
		require.Len(t, eng.Objects(), 2+2+2+2*2)
		svc.Status.LoadBalancer = *st // the service controller's status patch
		got, exists, err := b.GetLoadBalancer(t.Context(), "c", svc)
		require.NoError(t, err)
		require.True(t, exists)
		require.Equal(t, st, got, "the Service's own status")
	})
}

// A call never waits for the provider: one pass, within CallTimeout,
// however long the provider takes.
func TestEnsureHoldsNoWorkerLongerThanACall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		eng := lbrecontest.New(lbrecontest.Config{Latency: time.Minute})
		b := newBalancer(t, eng, func(c *ccm.Config) { c.Reconciler.CallTimeout = time.Second })
		start := time.Now()
		_, err := b.EnsureLoadBalancer(t.Context(), "c", service("uid-1"), nodes(1))
		var re *api.RetryError
		require.ErrorAs(t, err, &re)
		require.LessOrEqual(t, time.Since(start), time.Second)
		require.ErrorIs(t, err, context.DeadlineExceeded, "the timed-out list is named")
	})
}

// A pass that failed part-way reports that failure, naming the Service,
// the object and the verb, although the load balancer exists and a Get
// would look fine.
func TestPartialUpdateErrorsAreNotMasked(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		eng := lbrecontest.New(lbrecontest.Config{Pending: time.Second, ListLag: time.Second})
		b := newBalancer(t, eng, nil)
		svc := service("uid-1")
		_, _, err := ensure(t, b, svc, nodes(2))
		require.NoError(t, err)

		isN3 := func(o lbrecon.Object) bool {
			s, ok := o.Spec.(lbrecon.ServerSpec)
			return ok && s.Address.String() == "10.0.0.3"
		}
		eng.FailCreate(isN3, 1, backoff.Permanent(errors.New("400 quota exceeded")))
		err = b.UpdateLoadBalancer(t.Context(), "c", svc, nodes(3))
		require.Error(t, err)
		var re *api.RetryError
		require.False(t, errors.As(err, &re), "a permanent failure is not a retry")
		for _, s := range []string{"default/web", "create", "server/n3.", "400 quota exceeded"} {
			require.Contains(t, err.Error(), s)
		}
		_, exists, gerr := b.GetLoadBalancer(t.Context(), "c", svc)
		require.NoError(t, gerr)
		require.True(t, exists, "the service controller keeps the error only while the load balancer exists")

		// A transient failure is a RetryError that carries it.
		eng.FailCreate(isN3, 2, nil)
		err = b.UpdateLoadBalancer(t.Context(), "c", svc, nodes(3))
		require.ErrorAs(t, err, &re)
		require.ErrorIs(t, err, lbrecontest.ErrInjected)
		require.Contains(t, err.Error(), "default/web")
	})
}

func TestWritesCarryTheTermsToken(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		eng := lbrecontest.New(lbrecontest.Config{})
		errNotLeader := errors.New("not leading")
		term, leading := uint64(3), true
		fence := lbrecon.NewFence("provider", 0, "")
		var mu sync.Mutex
		var seen []uint64
		b := newBalancer(t, eng, func(c *ccm.Config) {
			c.Token = func(context.Context) (uint64, error) {
				if !leading {
					return 0, errNotLeader
				}
				return term, nil
			}
			c.Admit = func(token uint64) error { // called from the reconciler's workers
				mu.Lock()
				seen = append(seen, token)
				mu.Unlock()
				return fence.Admit(token)
			}
		})
		_, _, err := ensure(t, b, service("uid-1"), nodes(1))
		require.NoError(t, err)
		require.NotEmpty(t, seen)
		for _, tok := range seen {
			require.Equal(t, uint64(3), tok)
		}

		leading = false
		creates := eng.Calls()[lbrecon.VerbCreate]
		_, err = b.EnsureLoadBalancer(t.Context(), "c", service("uid-2"), nodes(1))
		require.ErrorIs(t, err, errNotLeader)
		require.Equal(t, creates, eng.Calls()[lbrecon.VerbCreate], "no write without a term")

		leading = true
		fence.Reset(5) // a later term wrote
		_, err = b.EnsureLoadBalancer(t.Context(), "c", service("uid-2"), nodes(1))
		require.ErrorIs(t, err, lbrecon.ErrFenced)
		require.Equal(t, creates, eng.Calls()[lbrecon.VerbCreate], "no write from a deposed term")
	})
}

func TestDeleteTearsDownOnlyWhatTheServiceOwns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		eng := lbrecontest.New(lbrecontest.Config{Pending: time.Second, ListLag: time.Second, DeleteDelay: time.Second, Integrity: true})
		other := eng.Put(lbrecon.Object{Kind: lbrecon.KindBackend, Name: "http.uid-1", Tags: []string{ccm.DefaultTagKey + "=uid-2"},
			Spec: lbrecon.BackendSpec{LoadBalancer: "lb-1"}})
		manual := eng.Put(lbrecon.Object{Kind: lbrecon.KindBackend, Name: "https.uid-1", Spec: lbrecon.BackendSpec{LoadBalancer: "lb-2"}})
		b := newBalancer(t, eng, nil)
		svc := service("uid-1")
		_, _, err := ensure(t, b, svc, nodes(2))
		require.NoError(t, err)

		deleteConverged(t, b, svc)
		require.Equal(t, []lbrecon.Object{other, manual}, eng.Objects())
		_, exists, err := b.GetLoadBalancer(t.Context(), "c", svc)
		require.NoError(t, err)
		require.False(t, exists)
		// Again, and in a new process: nothing more is destroyed. Each
		// converges once a listing the list lag after its sweep began
		// shows nothing left, since a crashed predecessor's late
		// creation could show until then.
		eng.ResetCalls()
		deleteConverged(t, b, svc)
		deleteConverged(t, newBalancer(t, eng, nil), svc)
		require.Equal(t, []lbrecon.Object{other, manual}, eng.Objects())
		require.Zero(t, eng.Calls()[lbrecon.VerbDestroy], "idempotent")
	})
}

// deleteConverged calls EnsureLoadBalancerDeleted as the service controller
// does until it returns nil, waiting out each RetryError, and fails on any
// other error.
func deleteConverged(t *testing.T, b *ccm.Balancer, svc *v1.Service) {
	t.Helper()
	for calls := 1; ; calls++ {
		require.Less(t, calls, 100)
		err := b.EnsureLoadBalancerDeleted(t.Context(), "c", svc)
		var re *api.RetryError
		if errors.As(err, &re) {
			<-time.After(re.RetryAfter())
			continue
		}
		require.NoError(t, err)
		return
	}
}

// A new process (a fresh Balancer) with the journal sees the creations its
// predecessor sent although the listing does not show them yet: the load
// balancer exists, and nothing is created twice.
func TestRestartWithTheJournal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		eng := lbrecontest.New(lbrecontest.Config{Pending: time.Second, ListLag: 5 * time.Second, UniqueBinds: true, Integrity: true})
		journal := &ccm.MemoryJournal{} // outlives the Balancer, as a durable journal does
		mod := func(c *ccm.Config) {
			c.Journal = journal
			c.Reconciler.ListLag = 5 * time.Second
		}
		svc := service("uid-1")
		_, err := newBalancer(t, eng, mod).EnsureLoadBalancer(t.Context(), "c", svc, nodes(2))
		var re *api.RetryError
		require.ErrorAs(t, err, &re)
		require.Equal(t, 2, eng.Calls()[lbrecon.VerbCreate])

		b := newBalancer(t, eng, mod)
		_, exists, err := b.GetLoadBalancer(t.Context(), "c", svc)
		require.NoError(t, err)
		require.True(t, exists, "the predecessor's creations are not listed yet, but journaled")
		_, _, err = ensure(t, b, svc, nodes(2))
		require.NoError(t, err)
		require.Len(t, eng.Objects(), 2+2+2+2*2, "no duplicate")
	})
}

// A converged Service costs one provider List per call and no write: the
// sweep of other load-balancer IDs stops once a listing the list lag after
// it began shows nothing left there (a late creation of a crashed
// predecessor shows by then), and a provider that answers at once is not
// asked more often.
func TestConvergedCallCostsOneList(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		eng := lbrecontest.New(lbrecontest.Config{Pending: time.Second, ListLag: time.Second})
		b := newBalancer(t, eng, nil)
		svc := service("uid-1")
		_, _, err := ensure(t, b, svc, nodes(2))
		require.NoError(t, err)
		eng.ResetCalls()
		// The sweep's own listings, until one the lag after it began.
		for range 2 {
			require.NoError(t, b.UpdateLoadBalancer(t.Context(), "c", svc, nodes(2)))
			<-time.After(time.Second)
		}
		require.Equal(t, map[lbrecon.Verb]int{lbrecon.VerbList: 4}, eng.Calls(), "the sweep lists until the lag has passed")
		eng.ResetCalls()
		for range 10 {
			require.NoError(t, b.UpdateLoadBalancer(t.Context(), "c", svc, nodes(2)))
			<-time.After(time.Second)
		}
		require.Equal(t, map[lbrecon.Verb]int{lbrecon.VerbList: 10}, eng.Calls(), "10 calls in 10 s")
	})
}
