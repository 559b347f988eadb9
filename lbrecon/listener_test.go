package lbrecon_test

import (
	"net/netip"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/require"

	"github.com/reconkit/reconkit/lbrecon"
	"github.com/reconkit/reconkit/lbrecon/lbrecontest"
)

// On a provider that refuses two binds on one address and port, changes
// that move a listener from one bind to another converge: a bind destroyed
// anyway goes first, and two ports swapping external ports give up
// make-before-break for one bind per address, not for every bind.
func TestListenersMovedBetweenBinds(t *testing.T) {
	for _, tc := range []struct {
		name   string
		engine func(*lbrecontest.Engine) lbrecon.Engine
		change func(*lbrecon.LoadBalancer)
		// per address: binds destroyed and created
		destroys, creates int
	}{
		{"swap, updated in place", func(e *lbrecontest.Engine) lbrecon.Engine { return e }, swapPorts, 1, 1},
		{"swap, replaced", func(e *lbrecontest.Engine) lbrecon.Engine { return struct{ lbrecon.Engine }{e} }, swapPorts, 2, 2},
		{"port removed, another takes its external port", func(e *lbrecontest.Engine) lbrecon.Engine { return e }, takeOver, 1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				eng := realistic(nil) // UniqueBinds
				lb := desc(2, 2, 2)
				var o outcomes
				r := newLB(t, tc.engine(eng), lb, o.hook)
				require.NoError(t, r.Reconcile(t.Context()))
				created, destroyed := o.get("create/ok"), o.get("destroy/ok")
				tc.change(&lb)
				require.NoError(t, r.SetLoadBalancer(lb))
				require.NoError(t, r.Reconcile(t.Context()))
				// Calls refused for a listener still held are retried;
				// count the ones that went through.
				na := len(lb.Addresses)
				destroys := tc.destroys * na
				if tc.name == "port removed, another takes its external port" {
					destroys += 1 + 1 + len(lb.Targets) // the removed port's backend, frontend, servers
				}
				require.Equal(t, destroys, o.get("destroy/ok")-destroyed)
				require.Equal(t, tc.creates*na, o.get("create/ok")-created)
				requireConverged(t, eng, r, lb)
			})
		})
	}
}

func swapPorts(lb *lbrecon.LoadBalancer) {
	lb.Ports[0].ExternalPort, lb.Ports[1].ExternalPort = lb.Ports[1].ExternalPort, lb.Ports[0].ExternalPort
}

func takeOver(lb *lbrecon.LoadBalancer) {
	lb.Ports[0].ExternalPort = lb.Ports[1].ExternalPort
	lb.Ports = lb.Ports[:1]
}

// Someone moves a bind or a server to another address, keeping its name:
// the address is not a field the provider changes in place, so the plan
// replaces the object instead of updating it.
func TestEditedAddressReplacesTheObject(t *testing.T) {
	for _, kind := range []string{lbrecon.KindBind, lbrecon.KindServer} {
		t.Run(kind, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				eng := newEngine(lbrecontest.Config{})
				lb := desc(1, 1, 1)
				r := newLB(t, eng, lb, nil)
				require.NoError(t, r.Reconcile(t.Context()))
				var edited lbrecon.Object
				for _, o := range eng.Objects() {
					if o.Kind == kind {
						edited = o
					}
				}
				other := netip.MustParseAddr("203.0.113.99")
				switch s := edited.Spec.(type) {
				case lbrecon.BindSpec:
					s.Address = other
					edited.Spec = s
				case lbrecon.ServerSpec:
					s.Address = other
					edited.Spec = s
				}
				eng.Put(edited)
				p, err := r.Check(t.Context())
				require.NoError(t, err)
				require.Empty(t, p.Update, "an address updated in place")
				require.NoError(t, r.Reconcile(t.Context()))
				requireConverged(t, eng, r, lb)
				for _, o := range eng.Objects() {
					require.NotEqual(t, edited.Key(), o.Key(), "the edited object kept")
				}
			})
		})
	}
}
