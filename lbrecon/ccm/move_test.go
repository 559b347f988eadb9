package ccm_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"

	"github.com/reconkit/reconkit/lbrecon"
	"github.com/reconkit/reconkit/lbrecon/ccm"
	"github.com/reconkit/reconkit/lbrecon/lbrecontest"
)

// movingMapping is testMapping with a load-balancer ID per Service UID
// that the test changes.
type movingMapping struct {
	mu  sync.Mutex
	ids map[string]string
}

func (m *movingMapping) set(uid, id string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.ids[uid] = id
}

func (m *movingMapping) mapping() ccm.Mapping {
	return ccm.Funcs{LoadBalancerFunc: func(ctx context.Context, cluster string, svc *v1.Service, nodes []*v1.Node) (lbrecon.LoadBalancer, error) {
		lb, err := testMapping.LoadBalancer(ctx, cluster, svc, nodes)
		m.mu.Lock()
		defer m.mu.Unlock()
		lb.ID = m.ids[string(svc.UID)]
		return lb, err
	}}
}

// onBalancer returns the objects on load balancer id carrying the tag of
// Service uid.
func onBalancer(eng *lbrecontest.Engine, id, uid string) []lbrecon.Object {
	var out []lbrecon.Object
	for _, o := range lbrecontest.OnLoadBalancer(eng.Objects(), id) {
		if o.HasTag(ccm.DefaultTagKey + "=" + uid) {
			out = append(out, o)
		}
	}
	return out
}

// A Service moved to another load-balancer ID: the new load balancer
// converges while the old one still serves (nothing destroyed until the
// new one is confirmed), then the old ID's objects of the Service are torn
// down, and only those: another Service's on the old ID stay. Nothing is
// created twice. After a restart (a new Balancer, knowing nothing of the
// old ID), a move tears down the load balancer the previous process left.
func TestServiceMovesToAnotherLoadBalancerID(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		eng := lbrecontest.New(lbrecontest.Config{Latency: 10 * time.Millisecond, Pending: time.Second, ListLag: time.Second,
			DeleteDelay: time.Second, Integrity: true})
		mm := &movingMapping{ids: map[string]string{"uid-1": "lb-1", "uid-2": "lb-1"}}
		mod := func(c *ccm.Config) { c.Mapping = mm.mapping() }
		b := newBalancer(t, eng, mod)
		svc, other := service("uid-1"), service("uid-2")
		other.Name = "api"
		for _, s := range []*v1.Service{svc, other} {
			_, _, err := ensure(t, b, s, nodes(2))
			require.NoError(t, err)
		}
		const perService = 2 + 2 + 2 + 2*2
		otherObjs := onBalancer(eng, "lb-1", "uid-2")
		require.Len(t, otherObjs, perService)
		require.Len(t, onBalancer(eng, "lb-1", "uid-1"), perService)

		eng.ResetCalls()
		mm.set("uid-1", "lb-2")
		// ensure, checking that nothing is destroyed before the new load
		// balancer is confirmed.
		confirmed := false
		for calls := 0; ; calls++ {
			require.Less(t, calls, 200)
			_, err := b.EnsureLoadBalancer(t.Context(), "c", svc, nodes(2))
			if err == nil {
				break
			}
			if !confirmed {
				r, err := lbrecon.NewLoadBalancer(lbrecon.Config{Engine: eng, Tag: ccm.DefaultTagKey + "=uid-1", Journal: lbrecon.NoJournal},
					lbrecon.LoadBalancer{ID: "lb-2", Suffix: "uid-1"})
				require.NoError(t, err)
				obs, err := r.Observe(t.Context())
				require.NoError(t, err)
				confirmed = len(obs.Objects(lbrecon.KindBind)) > 0 && len(onBalancer(eng, "lb-2", "uid-1")) == perService
				if !confirmed {
					require.Zero(t, eng.Calls()[lbrecon.VerbDestroy], "nothing destroyed before the new load balancer is built")
				}
			}
			<-time.After(time.Second)
		}
		// The new load balancer's status is published; the Service's
		// later calls tear the old one down.
		later := tearDownOld(t, b, eng, svc, "lb-1")
		t.Logf("old load balancer torn down over %d later calls", later)
		require.Empty(t, onBalancer(eng, "lb-1", "uid-1"), "the old ID's objects of the Service torn down")
		require.Len(t, onBalancer(eng, "lb-2", "uid-1"), perService)
		require.Equal(t, otherObjs, onBalancer(eng, "lb-1", "uid-2"), "another Service's objects on the old ID untouched")
		require.Equal(t, perService, eng.Calls()[lbrecon.VerbCreate], "nothing created twice")
		require.Equal(t, perService, eng.Calls()[lbrecon.VerbDestroy], "each old object destroyed once")

		// A restart, then a move: the new process knows nothing of lb-2.
		mm.set("uid-1", "lb-3")
		b = newBalancer(t, eng, mod)
		_, _, err := ensure(t, b, svc, nodes(2))
		require.NoError(t, err)
		tearDownOld(t, b, eng, svc, "lb-2")
		require.Empty(t, onBalancer(eng, "lb-2", "uid-1"), "the load balancer left before the restart torn down")
		require.Len(t, onBalancer(eng, "lb-3", "uid-1"), perService)
		require.Equal(t, otherObjs, onBalancer(eng, "lb-1", "uid-2"))
		_, exists, err := b.GetLoadBalancer(t.Context(), "c", svc)
		require.NoError(t, err)
		require.True(t, exists)
	})
}

// tearDownOld calls EnsureLoadBalancer once a second, as the service
// controller's later syncs of the Service do, until nothing of svc is left
// on load balancer old; each call succeeds (the new load balancer
// converged). It returns the calls made.
func tearDownOld(t *testing.T, b *ccm.Balancer, eng *lbrecontest.Engine, svc *v1.Service, old string) int {
	t.Helper()
	calls := 0
	for ; len(onBalancer(eng, old, string(svc.UID))) > 0; calls++ {
		require.Less(t, calls, 60, "old load balancer %s not torn down", old)
		st, err := b.EnsureLoadBalancer(t.Context(), "c", svc, nodes(2))
		require.NoError(t, err, "the new load balancer's status, whatever the old one does")
		require.NotEmpty(t, st.Ingress)
		<-time.After(time.Second)
	}
	return calls
}

// A move publishes the new load balancer's address once it converged,
// while the old one refuses to go; the old one goes once it can.
func TestMovePublishesWhileTheOldResists(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		eng := lbrecontest.New(lbrecontest.Config{Pending: time.Second, ListLag: time.Second, DeleteDelay: time.Second, Integrity: true})
		mm := &movingMapping{ids: map[string]string{"uid-1": "lb-1"}}
		b := newBalancer(t, eng, func(c *ccm.Config) { c.Mapping = mm.mapping() })
		svc := service("uid-1")
		_, _, err := ensure(t, b, svc, nodes(2))
		require.NoError(t, err)
		oldIDs := map[string]bool{}
		for _, o := range onBalancer(eng, "lb-1", "uid-1") {
			oldIDs[o.ID] = true
		}
		eng.FailDestroy(func(o lbrecon.Object) bool { return oldIDs[o.ID] }, 40)

		mm.set("uid-1", "lb-2")
		st, calls, err := ensure(t, b, svc, nodes(2))
		require.NoError(t, err, "published after %d calls", calls)
		require.Equal(t, []v1.LoadBalancerIngress{{IP: "192.0.2.10"}}, st.Ingress)
		require.Len(t, onBalancer(eng, "lb-1", "uid-1"), len(oldIDs), "the old one still there")
		tearDownOld(t, b, eng, svc, "lb-1")
		require.Len(t, onBalancer(eng, "lb-2", "uid-1"), 2+2+2+2*2)
	})
}

// A creation on the old ID whose answer was lost, on a listing that lags,
// shows up after the Service moved back to a load balancer that is
// converged already: the old ID's reconciler holds the creation and
// destroys it once it shows; nothing of the Service stays on the old ID.
func TestMoveSweepsALateCreationOnTheOldID(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		eng := lbrecontest.New(lbrecontest.Config{Pending: time.Second, ListLag: 5 * time.Second, DeleteDelay: time.Second, Integrity: true})
		mm := &movingMapping{ids: map[string]string{"uid-1": "lb-2"}}
		b := newBalancer(t, eng, func(c *ccm.Config) { c.Mapping = mm.mapping(); c.Reconciler.ListLag = 5 * time.Second })
		svc := service("uid-1")
		_, _, err := ensure(t, b, svc, nodes(2))
		require.NoError(t, err)

		mm.set("uid-1", "lb-1")
		eng.FailCreateAfter(func(o lbrecon.Object) bool { return o.Kind == lbrecon.KindBackend }, 2)
		_, err = b.EnsureLoadBalancer(t.Context(), "c", svc, nodes(2))
		require.True(t, isRetry(err), "%v", err)
		require.Len(t, onBalancer(eng, "lb-1", "uid-1"), 2, "created, answers lost, not listed yet")

		mm.set("uid-1", "lb-2") // back, before any listing shows them
		_, err = b.EnsureLoadBalancer(t.Context(), "c", svc, nodes(2))
		require.NoError(t, err, "lb-2 is converged: its status at once")
		tearDownOld(t, b, eng, svc, "lb-1")
		<-time.After(time.Minute) // anything late is listed by now
		require.Empty(t, onBalancer(eng, "lb-1", "uid-1"), "the late creations swept")
		require.Len(t, onBalancer(eng, "lb-2", "uid-1"), 2+2+2+2*2)
	})
}
