package lbrecon_test

import (
	"net/netip"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconkit/reconkit/lbrecon"
	"github.com/reconkit/reconkit/lbrecon/lbrecontest"
)

// ownedOn returns the objects of engine eng on load balancer id carrying tag
// ("" for untagged ones).
func ownedOn(eng *lbrecontest.Engine, id, tag string) []lbrecon.Object {
	var out []lbrecon.Object
	for _, o := range lbrecontest.OnLoadBalancer(eng.Objects(), id) {
		if (tag == "" && len(o.Tags) > 0) || (tag != "" && !o.HasTag(tag)) {
			continue
		}
		out = append(out, o)
	}
	return out
}

// moved returns lb on load balancer id.
func moved(lb lbrecon.LoadBalancer, id string) lbrecon.LoadBalancer {
	lb.ID = id
	return lb
}

// A load balancer moved to another ID, blocking and one pass at a time:
// the new one is built while the old one still serves, then the old one
// is torn down, only what the owner had there; another owner's load
// balancer on the old ID and an untagged object there stay; nothing is
// created twice. A Moving started afresh (a restart) on a third ID tears
// the second down, found by the tag.
func TestMovingToAnotherID(t *testing.T) {
	for _, oncePasses := range []bool{false, true} {
		t.Run(map[bool]string{false: "Reconcile", true: "ReconcileOnce"}[oncePasses], func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				eng := realistic(nil)
				lb := desc(2, 2, 3)
				other := lb
				other.Suffix = "svc-2"
				other.Addresses = []netip.Addr{netip.MustParseAddr("198.51.100.1")} // binds are unique per address and port
				r2 := newLB(t, eng, other, func(c *lbrecon.Config) { c.Tag = "owner=svc-2" })
				require.NoError(t, r2.Reconcile(t.Context()))
				untagged := eng.Put(lbrecon.Object{Kind: lbrecon.KindBackend, Name: "hand-made",
					Spec: lbrecon.BackendSpec{LoadBalancer: "lb-1"}, State: lbrecon.StateOK})
				otherBefore := ownedOn(eng, "lb-1", "owner=svc-2")

				cfg := lbrecon.Config{Engine: eng, Tag: owner, Journal: lbrecon.NoJournal}
				m, err := lbrecon.NewMoving(cfg, lb)
				require.NoError(t, err)
				// converge calls m until converged; one pass at a time,
				// it checks that nothing is destroyed while the current
				// load balancer is not built.
				converge := func() {
					t.Helper()
					if !oncePasses {
						require.NoError(t, m.Reconcile(t.Context()))
						return
					}
					destroyed := eng.Calls()[lbrecon.VerbDestroy]
					for range 100 {
						res, err := m.ReconcileOnce(t.Context())
						require.NoError(t, err)
						if res.Converged {
							return
						}
						if p, err := m.Current().Check(t.Context()); err == nil && !p.Empty() {
							require.Equal(t, destroyed, eng.Calls()[lbrecon.VerbDestroy],
								"nothing destroyed while the new load balancer is being built")
						}
						require.Positive(t, res.RequeueAfter)
						<-time.After(res.RequeueAfter)
					}
					t.Fatal("not converged")
				}
				converge()
				require.Len(t, ownedOn(eng, "lb-1", owner), objectCount(lb))

				eng.ResetCalls()
				require.NoError(t, m.SetLoadBalancer(moved(lb, "lb-2")))
				converge()
				require.Empty(t, ownedOn(eng, "lb-1", owner), "the old load balancer torn down")
				require.Len(t, ownedOn(eng, "lb-2", owner), objectCount(lb))
				require.Equal(t, otherBefore, ownedOn(eng, "lb-1", "owner=svc-2"), "another owner's objects untouched")
				require.Equal(t, []lbrecon.Object{untagged}, ownedOn(eng, "lb-1", ""), "the untagged object untouched")
				require.Equal(t, objectCount(lb), eng.Calls()[lbrecon.VerbCreate], "nothing created twice")
				require.Equal(t, objectCount(lb), eng.Calls()[lbrecon.VerbDestroy], "each old object destroyed once")
				requireConverged(t, eng, m.Current(), moved(lb, "lb-2"))

				// A restart: a new Moving on lb-3 knows nothing of lb-2.
				m, err = lbrecon.NewMoving(cfg, moved(lb, "lb-3"))
				require.NoError(t, err)
				converge()
				require.Empty(t, ownedOn(eng, "lb-2", owner), "the load balancer left by the previous process torn down")
				require.Len(t, ownedOn(eng, "lb-3", owner), objectCount(lb))
				require.Equal(t, otherBefore, ownedOn(eng, "lb-1", "owner=svc-2"))
			})
		})
	}
}

// A move back to an ID not yet torn down takes that ID's reconciler back;
// no journal chosen and an invalid description are refused.
func TestMovingRefusesAndReturns(t *testing.T) {
	eng := newEngine(lbrecontest.Config{})
	_, err := lbrecon.NewMoving(lbrecon.Config{Engine: eng, Tag: owner}, desc(1, 1, 1))
	require.ErrorIs(t, err, lbrecon.ErrInvalidConfig)
	m, err := lbrecon.NewMoving(lbrecon.Config{Engine: eng, Tag: owner, Journal: lbrecon.NoJournal}, desc(1, 1, 1))
	require.NoError(t, err)
	first := m.Current()
	require.NoError(t, m.SetLoadBalancer(moved(desc(1, 1, 1), "lb-2")))
	require.NotSame(t, first, m.Current())
	require.NoError(t, m.SetLoadBalancer(desc(1, 1, 2)))
	require.Same(t, first, m.Current(), "the first ID's reconciler, with its memory")
	require.ErrorIs(t, m.SetLoadBalancer(moved(desc(1, 1, 1), "")), lbrecon.ErrInvalidConfig)
}
