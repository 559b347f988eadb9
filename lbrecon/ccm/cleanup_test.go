package ccm_test

import (
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	"k8s.io/cloud-provider/api"

	"github.com/reconkit/reconkit/lbrecon"
	"github.com/reconkit/reconkit/lbrecon/ccm"
	"github.com/reconkit/reconkit/lbrecon/lbrecontest"
)

// deleteAll calls GetLoadBalancer, then EnsureLoadBalancerDeleted while it
// answers exists, as the service controller's cleanup does (after a
// RetryError's delay; the controller backs off longer), until the load
// balancer is gone. It returns the EnsureLoadBalancerDeleted calls made.
func deleteAll(t *testing.T, b *ccm.Balancer, svc *v1.Service) int {
	t.Helper()
	for calls := 0; calls < 100; {
		_, exists, err := b.GetLoadBalancer(t.Context(), "c", svc)
		require.NoError(t, err, "GetLoadBalancer never fails on the Service's spec")
		if !exists {
			return calls
		}
		calls++
		err = b.EnsureLoadBalancerDeleted(t.Context(), "c", svc)
		var re *api.RetryError
		if errors.As(err, &re) {
			<-time.After(re.RetryAfter())
			continue
		}
		require.NoError(t, err)
	}
	t.Fatal("not deleted after 100 calls")
	return 0
}

func owned(eng *lbrecontest.Engine, uid string) []lbrecon.Object {
	var out []lbrecon.Object
	for _, o := range eng.Objects() {
		if o.HasTag(ccm.DefaultTagKey + "=" + uid) {
			out = append(out, o)
		}
	}
	return out
}

// type LoadBalancer -> ClusterIP: the apiserver drops the node ports, so
// the mapping refuses the spec; GetLoadBalancer and
// EnsureLoadBalancerDeleted need none of it, and every object goes.
func TestCleanupAfterTypeChangeNeedsNoSpec(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		eng := lbrecontest.New(lbrecontest.Config{Pending: time.Second, ListLag: time.Second, DeleteDelay: time.Second, Integrity: true})
		b := newBalancer(t, eng, nil)
		svc := service("uid-1")
		_, _, err := ensure(t, b, svc, nodes(2))
		require.NoError(t, err)
		require.Len(t, owned(eng, "uid-1"), 2+2+2+2*2)

		svc.Spec.Type = v1.ServiceTypeClusterIP
		for i := range svc.Spec.Ports {
			svc.Spec.Ports[i].NodePort = 0
		}
		_, err = ccm.ServicePorts(svc)
		require.Error(t, err, "the spec no longer maps")
		for _, fresh := range []bool{false, true} { // this process, and a new one
			bb := b
			if fresh {
				_, _, err := ensure(t, b, service("uid-1"), nodes(2))
				require.NoError(t, err)
				bb = newBalancer(t, eng, nil)
			}
			require.Positive(t, deleteAll(t, bb, svc))
			require.Empty(t, owned(eng, "uid-1"), "fresh process %v", fresh)
		}
	})
}

// A Service the plan cannot express (mixed protocols on one port, no node
// ports) is refused on EnsureLoadBalancer with an error naming the field,
// never a RetryError; deleting it completes.
func TestUnsupportedServiceIsRefusedByFieldAndDeletes(t *testing.T) {
	no := false
	for name, c := range map[string]struct {
		mod   func(*v1.Service)
		field string
	}{
		"mixed protocols": {func(s *v1.Service) {
			s.Spec.Ports = append(s.Spec.Ports, v1.ServicePort{Name: "dns", Port: 80, NodePort: 30053, Protocol: v1.ProtocolUDP})
		}, "spec.ports[2]"},
		"no node ports": {func(s *v1.Service) {
			s.Spec.AllocateLoadBalancerNodePorts = &no
			s.Spec.Ports[1].NodePort = 0
		}, "spec.ports[1].nodePort"},
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				eng := lbrecontest.New(lbrecontest.Config{Pending: time.Second, ListLag: time.Second})
				b := newBalancer(t, eng, nil)
				svc := service("uid-1")
				c.mod(svc)
				_, err := b.EnsureLoadBalancer(t.Context(), "c", svc, nodes(2))
				require.ErrorIs(t, err, ccm.ErrUnsupportedService)
				require.False(t, isRetry(err), "a permanent error, not a RetryError")
				require.Contains(t, err.Error(), c.field)
				require.Contains(t, err.Error(), "default/web")
				require.Zero(t, deleteAll(t, b, svc), "nothing to delete: the finalizer goes")
				require.Empty(t, eng.Objects())
			})
		})
	}
}

// A new process (no memory) on a listing that lags: GetLoadBalancer
// counts every journal entry, so it answers exists while creations no
// listing shows may have happened, and EnsureLoadBalancerDeleted holds
// them until the lag proves them absent or destroys them: nothing leaks.
func TestNewProcessDeleteCountsTheJournal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		eng := lbrecontest.New(lbrecontest.Config{Pending: time.Second, ListLag: 5 * time.Second, DeleteDelay: time.Second, Integrity: true})
		journal := &ccm.MemoryJournal{}
		mod := func(c *ccm.Config) { c.Journal, c.Reconciler.ListLag = journal, 5*time.Second }
		svc := service("uid-1")
		_, err := newBalancer(t, eng, mod).EnsureLoadBalancer(t.Context(), "c", svc, nodes(2))
		require.True(t, isRetry(err))
		require.Equal(t, 2, eng.Calls()[lbrecon.VerbCreate], "the backends: sent, not listed yet")

		svc.Spec.Type = v1.ServiceTypeClusterIP
		b := newBalancer(t, eng, mod) // the new leader, knowing nothing
		_, exists, err := b.GetLoadBalancer(t.Context(), "c", svc)
		require.NoError(t, err)
		require.True(t, exists, "the journal names creations the listing does not show")
		deleteAll(t, b, svc)
		<-time.After(10 * time.Second) // everything the provider did is listed by now
		require.Empty(t, owned(eng, "uid-1"), "nothing leaked")
		scopes, err := journal.Scopes(t.Context(), svc)
		require.NoError(t, err)
		require.Empty(t, scopes, "the journal emptied")
	})
}
