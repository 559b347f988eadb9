package lbrecon_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"path/filepath"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconkit/reconkit/lbrecon"
	"github.com/reconkit/reconkit/lbrecon/lbrecontest"
)

// Tests of the load-balancer-first plan (LoadBalancer.Provision) on the
// two provider models: ELB/Octavia-shaped (listeners) and HAProxy-shaped
// (frontends with binds on the assigned address).

// shape is one provider model and the plan that drives it.
type shape struct {
	name   string
	model  func(lbrecontest.Config) lbrecontest.Config
	listen lbrecon.Listening
}

var shapes = []shape{
	{name: "elb", model: lbrecontest.ELB, listen: lbrecon.ListenPorts},
	{name: "haproxy", model: lbrecontest.HAProxy, listen: lbrecon.ListenBinds},
}

// provisioned is desc(ports, 0, targets) with the load balancer created
// by the plan: it binds only on the address the provider assigns.
func (s shape) provisioned(ports, targets int) lbrecon.LoadBalancer {
	lb := desc(ports, 0, targets)
	lb.Provision, lb.Listening = true, s.listen
	return lb
}

// engine returns the shape's model with a 1 s list lag, declared, and the
// VIP showing vipDelay after the load balancer is ok.
func (s shape) engine(vipDelay time.Duration, mod func(*lbrecontest.Config)) *lbrecontest.Engine {
	cfg := s.model(lbrecontest.Config{Latency: 20 * time.Millisecond, Pending: time.Second, ListLag: time.Second,
		DeclareListLag: true, DeleteDelay: 2 * time.Second, VIPDelay: vipDelay})
	if mod != nil {
		mod(&cfg)
	}
	return lbrecontest.New(cfg)
}

func lbObject(t *testing.T, eng *lbrecontest.Engine) lbrecon.Object {
	t.Helper()
	var found []lbrecon.Object
	for _, o := range eng.Objects() {
		if o.Kind == lbrecon.KindLoadBalancer {
			found = append(found, o)
		}
	}
	require.Len(t, found, 1, "load-balancer objects")
	return found[0]
}

// byKey snapshots the engine's objects.
func byKey(eng *lbrecontest.Engine) map[lbrecon.Key]lbrecon.Object {
	out := map[lbrecon.Key]lbrecon.Object{}
	for _, o := range eng.Objects() {
		out[o.Key()] = o
	}
	return out
}

// parentWatch checks, at each creation of a backend, frontend or
// listener, that the load-balancer object it names is ok at the provider.
type parentWatch struct {
	*lbrecontest.Engine
	mu      sync.Mutex
	created int
	early   []string
}

func (w *parentWatch) Create(ctx context.Context, obj lbrecon.Object) (lbrecon.Object, error) {
	var id string
	switch s := obj.Spec.(type) {
	case lbrecon.BackendSpec:
		id = s.LoadBalancer
	case lbrecon.FrontendSpec:
		id = s.LoadBalancer
	case lbrecon.ListenerSpec:
		id = s.LoadBalancer
	}
	if id != "" {
		p, err := w.Get(ctx, lbrecon.Object{Kind: lbrecon.KindLoadBalancer, ID: id})
		w.mu.Lock()
		w.created++
		if err != nil || p.State != lbrecon.StateOK {
			w.early = append(w.early, obj.String())
		}
		w.mu.Unlock()
	}
	return w.Engine.Create(ctx, obj)
}

// The plan creates the load balancer, then its children under the ID the
// provider gave it, converges only once the provider assigned its
// address, and from then on changes nothing however often it runs: the
// assigned attributes are status, not spec.
func TestProvisionConvergesAndStays(t *testing.T) {
	for _, s := range shapes {
		t.Run(s.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				eng := s.engine(0, nil)
				w := &parentWatch{Engine: eng}
				lb := s.provisioned(2, 3)
				r := newLB(t, w, lb, nil)
				_, _, ok := r.Assigned()
				require.False(t, ok)
				require.NoError(t, r.Reconcile(t.Context()))
				require.True(t, lbrecontest.Converged(lb, owner)(eng.Objects()), "%v", eng.Objects())
				o := lbObject(t, eng)
				st, id, ok := r.Assigned()
				require.True(t, ok)
				require.Equal(t, o.ID, id)
				require.Equal(t, lbrecon.LoadBalancerStatus{Address: netip.MustParseAddr("198.51.100.1"), Hostname: "lb-1.lb.example"}, st)
				require.Equal(t, objectCount(lb), eng.Calls()[lbrecon.VerbCreate], "every name created once")
				require.Equal(t, 2*len(lb.Ports), w.created, "backends and frontends or listeners")
				require.Empty(t, w.early, "created before their load balancer was ok")
				bound, err := r.Status(t.Context())
				require.NoError(t, err)
				require.Equal(t, map[netip.Addr][]uint16{st.Address: {80, 81}}, bound)
				requireConverged(t, eng, r, lb)

				before := byKey(eng)
				calls := eng.Calls()
				for range 10 {
					<-time.After(time.Second)
					res, err := r.ReconcileOnce(t.Context())
					require.NoError(t, err)
					require.True(t, res.Converged)
				}
				require.Equal(t, before, byKey(eng), "nothing renamed or rebuilt")
				for _, v := range []lbrecon.Verb{lbrecon.VerbCreate, lbrecon.VerbDestroy, lbrecon.VerbUpdate, lbrecon.VerbTag} {
					require.Equal(t, calls[v], eng.Calls()[v], "%s calls after convergence", v)
				}
			})
		})
	}
}

// The address shows 30 s after the load balancer is ok: the children that
// need only its ID are made meanwhile, the plan reports the load balancer
// pending and does not converge, Assigned reports nothing; once the
// address shows, the plan converges (HAProxy: binds on it) and Assigned
// reports it.
func TestProvisionVIPArrivesLate(t *testing.T) {
	for _, s := range shapes {
		t.Run(s.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				eng := s.engine(30*time.Second, nil)
				lb := s.provisioned(2, 2)
				r := newLB(t, eng, lb, nil)
				start := time.Now()
				var res lbrecon.Result
				var err error
				for time.Since(start) < 25*time.Second {
					res, err = r.ReconcileOnce(t.Context())
					require.NoError(t, err)
					require.False(t, res.Converged, "converged without an address at %v", time.Since(start))
					_, _, ok := r.Assigned()
					require.False(t, ok)
					<-time.After(res.RequeueAfter)
				}
				require.Len(t, res.Plan.Pending, 1, "the load balancer waits: %+v", res.Plan)
				require.Equal(t, lbrecon.KindLoadBalancer, res.Plan.Pending[0].Kind)
				noVIP := lb
				noVIP.Provision = false // what needs no address
				for _, o := range eng.Objects() {
					require.Equal(t, lbrecon.StateOK, o.State, "%v", o)
					require.NotEqual(t, lbrecon.KindBind, o.Kind, "no bind before the address")
				}
				want := objectCount(lb) - len(lb.Ports)*btoi(s.listen == lbrecon.ListenBinds)
				require.Len(t, eng.Objects(), want, "every object that needs no address")
				for !res.Converged {
					<-time.After(res.RequeueAfter)
					res, err = r.ReconcileOnce(t.Context())
					require.NoError(t, err)
				}
				require.Less(t, time.Since(start), 40*time.Second)
				st, _, ok := r.Assigned()
				require.True(t, ok)
				require.Equal(t, netip.MustParseAddr("198.51.100.1"), st.Address)
				require.True(t, lbrecontest.Converged(lb, owner)(eng.Objects()), "%v", eng.Objects())
			})
		})
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// The provider moves the VIP: Assigned reports the new address; on the
// ELB shape nothing is rebuilt; on the HAProxy shape only the binds move
// to the new address, everything else keeps its ID and spec.
func TestProvisionVIPChangedByProvider(t *testing.T) {
	for _, s := range shapes {
		t.Run(s.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				eng := s.engine(0, nil)
				lb := s.provisioned(2, 2)
				r := newLB(t, eng, lb, nil)
				require.NoError(t, r.Reconcile(t.Context()))
				before := byKey(eng)
				vip, ok := eng.Reassign(lbObject(t, eng).Key())
				require.True(t, ok)
				<-time.After(2 * time.Second) // past the lag
				require.NoError(t, r.Reconcile(t.Context()))
				st, _, ok := r.Assigned()
				require.True(t, ok)
				require.Equal(t, vip, st.Address)
				require.True(t, lbrecontest.Converged(lb, owner)(eng.Objects()), "%v", eng.Objects())
				after := byKey(eng)
				for k, o := range before {
					if o.Kind == lbrecon.KindBind {
						require.NotContains(t, after, k, "bind on the old address")
						continue
					}
					require.Contains(t, after, k)
					require.Equal(t, o.Spec, after[k].Spec)
				}
				if s.listen == lbrecon.ListenPorts {
					require.Equal(t, len(before), len(after))
				}
			})
		})
	}
}

// Someone deletes the load balancer (and the provider its children): the
// plan creates it again, with its children under the new ID, and Assigned
// reports the new one's address.
func TestProvisionLoadBalancerDeletedBySomeoneElse(t *testing.T) {
	for _, s := range shapes {
		t.Run(s.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				eng := s.engine(0, nil)
				lb := s.provisioned(2, 2)
				r := newLB(t, eng, lb, func(c *lbrecon.Config) { c.Journal = lbrecon.NewFileJournal(filepath.Join(t.TempDir(), "j")) })
				require.NoError(t, r.Reconcile(t.Context()))
				old := lbObject(t, eng)
				require.Equal(t, objectCount(lb), eng.DeleteTree(old.Key()))
				<-time.After(2 * time.Second) // past the lag
				require.NoError(t, r.Reconcile(t.Context()))
				now := lbObject(t, eng)
				require.NotEqual(t, old.ID, now.ID)
				st, id, ok := r.Assigned()
				require.True(t, ok)
				require.Equal(t, now.ID, id)
				require.Equal(t, netip.MustParseAddr("198.51.100.2"), st.Address, "the new load balancer's address")
				require.True(t, lbrecontest.Converged(lb, owner)(eng.Objects()), "%v", eng.Objects())
				require.Zero(t, duplicates(eng))
			})
		})
	}
}

// The provider fails the load balancer (its state turns failed): its
// children are destroyed before it, it is created again, and its children
// under the new one, on a provider that refuses to destroy a parent with
// children and to create a child under a missing parent.
func TestProvisionFailedLoadBalancerRecreatedChildrenFirst(t *testing.T) {
	for _, s := range shapes {
		t.Run(s.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				eng := s.engine(0, nil)
				w := &destroyWatch{Engine: eng}
				lb := s.provisioned(2, 2)
				var o outcomes
				r := newLB(t, w, lb, o.hook)
				require.NoError(t, r.Reconcile(t.Context()))
				old := lbObject(t, eng)
				require.True(t, eng.SetObjectState(old.Key(), lbrecon.StateFailed))
				<-time.After(2 * time.Second) // past the lag
				require.NoError(t, r.Reconcile(t.Context()))
				now := lbObject(t, eng)
				require.NotEqual(t, old.ID, now.ID, "a new load balancer")
				require.True(t, lbrecontest.Converged(lb, owner)(eng.Objects()), "%v", eng.Objects())
				require.Zero(t, o.get("destroy/conflict"), "the failed load balancer destroyed while its children were there")
				require.Zero(t, o.get("create/conflict"), "a child created under a missing parent")
				w.mu.Lock()
				defer w.mu.Unlock()
				require.Equal(t, []int{0}, w.others, "objects at the provider when the failed load balancer was destroyed")
				require.Zero(t, duplicates(eng))
			})
		})
	}
}

// destroyWatch records, at each Destroy of a load-balancer object, how
// many other objects the provider still held.
type destroyWatch struct {
	*lbrecontest.Engine
	mu     sync.Mutex
	others []int
}

func (w *destroyWatch) Destroy(ctx context.Context, obj lbrecon.Object) error {
	if obj.Kind == lbrecon.KindLoadBalancer {
		w.mu.Lock()
		w.others = append(w.others, len(w.Objects())-1)
		w.mu.Unlock()
	}
	return w.Engine.Destroy(ctx, obj)
}

// A teardown destroys the children first, each parent once a listing
// shows its children gone, and the load balancer last, once, on a
// provider whose deletions complete after 2 s and whose listings lag.
func TestProvisionTeardownChildrenBeforeTheLoadBalancer(t *testing.T) {
	for _, s := range shapes {
		t.Run(s.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				eng := s.engine(0, func(c *lbrecontest.Config) { c.Integrity = false }) // no refusal to lean on
				w := &destroyWatch{Engine: eng}
				lb := s.provisioned(2, 2)
				lb.HealthCheck = &lbrecon.HealthCheck{Port: 32000, Path: "/healthz"}
				r := newLB(t, w, lb, nil)
				require.NoError(t, r.Reconcile(t.Context()))
				require.NoError(t, r.Teardown(t.Context()))
				require.Empty(t, eng.Objects())
				require.Equal(t, []int{0}, w.others, "the load balancer destroyed once, after every child was gone")
				_, _, ok := r.Assigned()
				require.False(t, ok, "nothing assigned after a teardown")
			})
		})
	}
}

// externalTrafficPolicy Cluster to Local and back: only health checks
// are created and destroyed; every other object keeps its ID and spec.
func TestHealthCheckSwitchChangesOnlyHealthChecks(t *testing.T) {
	for _, s := range shapes {
		t.Run(s.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				eng := s.engine(0, nil)
				lb := s.provisioned(2, 3)
				r := newLB(t, eng, lb, nil)
				require.NoError(t, r.Reconcile(t.Context()))
				cluster := byKey(eng)
				local := lb
				local.HealthCheck = &lbrecon.HealthCheck{Port: 32000, Path: "/healthz"}
				require.NoError(t, r.SetLoadBalancer(local))
				calls := eng.Calls()
				require.NoError(t, r.Reconcile(t.Context()))
				require.True(t, lbrecontest.Converged(local, owner)(eng.Objects()), "%v", eng.Objects())
				require.Equal(t, calls[lbrecon.VerbCreate]+len(lb.Ports), eng.Calls()[lbrecon.VerbCreate])
				require.Equal(t, calls[lbrecon.VerbDestroy], eng.Calls()[lbrecon.VerbDestroy])
				require.Equal(t, calls[lbrecon.VerbUpdate], eng.Calls()[lbrecon.VerbUpdate])
				checks := 0
				for k, o := range byKey(eng) {
					if o.Kind == lbrecon.KindHealthCheck {
						checks++
						require.Equal(t, uint16(32000), o.Spec.(lbrecon.HealthCheckSpec).Port)
						continue
					}
					require.Equal(t, cluster[k], o, "unchanged")
				}
				require.Equal(t, len(lb.Ports), checks)

				local.HealthCheck.Port = 32001 // a new healthCheckNodePort: updated in place
				require.NoError(t, r.SetLoadBalancer(local))
				require.NoError(t, r.Reconcile(t.Context()))
				require.True(t, lbrecontest.Converged(local, owner)(eng.Objects()), "%v", eng.Objects())

				require.NoError(t, r.SetLoadBalancer(lb))
				require.NoError(t, r.Reconcile(t.Context()))
				require.Equal(t, cluster, byKey(eng), "back to Cluster: only the health checks went")
			})
		})
	}
}

// Provision cannot change for a reconciler, and a health check needs a
// port and a path.
func TestProvisionValidation(t *testing.T) {
	eng := lbrecontest.New(lbrecontest.Config{})
	lb := shapes[0].provisioned(1, 1)
	r := newLB(t, eng, lb, nil)
	other := lb
	other.Provision = false
	require.ErrorIs(t, r.SetLoadBalancer(other), lbrecon.ErrInvalidConfig)
	bad := lb
	bad.HealthCheck = &lbrecon.HealthCheck{Port: 32000, Path: "healthz"}
	require.ErrorIs(t, bad.Validate(), lbrecon.ErrInvalidConfig)
	bad.HealthCheck = &lbrecon.HealthCheck{Path: "/healthz"}
	require.ErrorIs(t, bad.Validate(), lbrecon.ErrInvalidConfig)
}

// Two terms: the first creates the load balancer and is deposed; the
// second, with the journal, converges a changed description; the deposed
// one's next pass, which would undo it, is refused by the provider's
// fence, and nothing is duplicated.
func TestProvisionFailoverBetweenTwoTerms(t *testing.T) {
	for _, s := range shapes {
		t.Run(s.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				eng := s.engine(0, func(c *lbrecontest.Config) { c.Fence = true })
				eng.LoseCreateAnswers(1) // the first term never learns the load balancer's ID
				path := filepath.Join(t.TempDir(), "j")
				journal := func(c *lbrecon.Config) { c.Journal = lbrecon.NewFileJournal(path) }
				lb := s.provisioned(2, 2)
				first := newLB(t, eng, lb, journal)
				res, err := first.ReconcileOnce(lbrecon.WithToken(t.Context(), 1))
				require.NoError(t, err)
				require.False(t, res.Converged)
				require.Equal(t, 1, eng.Calls()[lbrecon.VerbCreate], "the load balancer first, alone")

				changed := s.provisioned(3, 2)
				second := newLB(t, eng, changed, journal)
				require.NoError(t, second.Reconcile(lbrecon.WithToken(t.Context(), 2)))
				require.True(t, lbrecontest.Converged(changed, owner)(eng.Objects()), "%v", eng.Objects())
				require.Zero(t, duplicates(eng))

				<-time.After(2 * time.Second)
				_, err = first.ReconcileOnce(lbrecon.WithToken(t.Context(), 1))
				require.ErrorIs(t, err, lbrecon.ErrFenced)
				require.Positive(t, eng.Fenced())
				require.True(t, lbrecontest.Converged(changed, owner)(eng.Objects()), "the deposed term changed nothing: %v", eng.Objects())
			})
		})
	}
}

// On read replicas (listings that go backwards within a declared 3 s,
// one create answer in four lost), the plan converges, never duplicates,
// and a replica from before the address was assigned takes nothing away.
// Eight seeds per shape (three under -short).
func TestProvisionOnReplicas(t *testing.T) {
	for _, s := range shapes {
		for seed := range inShort[uint64](8, 3) {
			t.Run(fmt.Sprintf("%s/seed%d", s.name, seed), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					eng := lbrecontest.New(s.model(lbrecontest.Config{Latency: 20 * time.Millisecond, Pending: time.Second,
						ReplicaLag: replicaLag, DeclareListLag: true, Seed: seed, VIPDelay: time.Second}))
					eng.LoseCreateAnswers(4)
					lb := s.provisioned(2, 3)
					r := newLB(t, eng, lb, nil)
					converged := false
					for start := time.Now(); time.Since(start) < 12*replicaLag; {
						res, err := r.ReconcileOnce(t.Context())
						if errors.Is(err, lbrecon.ErrInconsistent) {
							t.Fatal(err)
						}
						require.Zero(t, duplicates(eng), "%v", eng.Objects())
						if err == nil && res.Converged {
							converged = true
							if time.Since(start) > 4*replicaLag {
								break
							}
						}
						<-time.After(300 * time.Millisecond)
					}
					require.True(t, converged)
					<-time.After(2 * replicaLag)
					require.NoError(t, r.Reconcile(t.Context()))
					require.True(t, lbrecontest.Converged(lb, owner)(eng.Objects()), "%v", eng.Objects())
					require.Zero(t, duplicates(eng))
				})
			})
		}
	}
}

// provisionCrashRun converges s.provisioned(2, 2) with a crash at the n-th
// write (which reached the provider when after), on the shape's model
// with a 3 s list lag, declared, one create answer in 11 lost, and the
// journal in a file; the next process, with no memory but the journal,
// converges it. It returns the duplicates at the end.
func provisionCrashRun(t *testing.T, s shape, n int, after bool) (dups int) {
	synctest.Test(t, func(t *testing.T) {
		eng := lbrecontest.New(s.model(lbrecontest.Config{Latency: 20 * time.Millisecond, Pending: time.Second,
			ListLag: crashLag, DeclareListLag: true, DeleteDelay: 2 * time.Second, VIPDelay: time.Second}))
		eng.LoseCreateAnswers(11)
		cr := lbrecontest.NewCrasher(eng)
		lb := s.provisioned(2, 2)
		path := filepath.Join(t.TempDir(), "lb-1.journal")
		process := func() *lbrecon.LoadBalancerReconciler {
			return newLB(t, cr, lb, func(c *lbrecon.Config) { c.Journal = lbrecon.NewFileJournal(path) })
		}
		crashed := cr.Arm(n, after)
		ctx, cancel := context.WithCancel(t.Context())
		watched := make(chan struct{})
		go func() {
			defer close(watched)
			select {
			case <-crashed:
				cancel()
			case <-ctx.Done():
			}
		}()
		err := process().Reconcile(ctx)
		cancel()
		<-watched
		require.Error(t, err, "converged before the crash at write %d", n)
		requireCrashedAt(t, cr, eng, n, after)
		if n == 1 {
			// The first write is the load balancer's creation, alone.
			p, _ := cr.Point()
			require.Equal(t, lbrecon.KindLoadBalancer, p.Object.Kind)
			require.Len(t, eng.Objects(), btoi(after))
		}
		cr.Restart()
		require.NoError(t, process().Reconcile(t.Context()))
		<-time.After(2 * crashLag) // past the lag: listings tell the truth
		require.True(t, lbrecontest.Converged(lb, owner)(eng.Objects()), "%v", eng.Objects())
		dups = duplicates(eng)
	})
	return dups
}

// Every crash point of the load-balancer-first plan, on both shapes:
// before and after each write, the load balancer's creation first. With
// the journal, no crash leaves a duplicate, the load balancer included.
// Under -short, each shape crashes at every other write (the ELB shape at
// the odd ones, the load balancer's creation among them; the HAProxy shape
// at the even ones).
func TestProvisionCrashAtEveryWrite(t *testing.T) {
	for i, s := range shapes {
		t.Run(s.name, func(t *testing.T) {
			var writes int
			synctest.Test(t, func(t *testing.T) {
				eng := lbrecontest.New(s.model(lbrecontest.Config{Latency: 20 * time.Millisecond, Pending: time.Second,
					ListLag: crashLag, DeclareListLag: true, DeleteDelay: 2 * time.Second, VIPDelay: time.Second}))
				eng.LoseCreateAnswers(11)
				cr := lbrecontest.NewCrasher(eng)
				require.NoError(t, newLB(t, cr, s.provisioned(2, 2), nil).Reconcile(t.Context()))
				writes = cr.Writes()
			})
			require.Equal(t, objectCount(s.provisioned(2, 2)), writes, "one write per object")
			dups := 0
			for n := 1 + inShort(0, i%2); n <= writes; n += inShort(1, 2) {
				for _, after := range []bool{false, true} {
					t.Run(fmt.Sprintf("write%d/after=%v", n, after), func(t *testing.T) { dups += provisionCrashRun(t, s, n, after) })
				}
			}
			require.Zero(t, dups)
		})
	}
}

// A host that lost the description (a restart that knows only the ID,
// from its journal's scopes) tears a provisioned load balancer down with
// a plain LoadBalancer{ID, Suffix}: the children of the load-balancer
// object of that name go first, then the object.
func TestProvisionTeardownByIDOnly(t *testing.T) {
	for _, s := range shapes {
		t.Run(s.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				eng := s.engine(0, nil)
				lb := s.provisioned(2, 2)
				require.NoError(t, newLB(t, eng, lb, nil).Reconcile(t.Context()))
				w := &destroyWatch{Engine: eng}
				byID := newLB(t, w, lbrecon.LoadBalancer{ID: lb.ID, Suffix: lb.Suffix}, nil)
				require.NoError(t, byID.Teardown(t.Context()))
				require.Empty(t, eng.Objects())
				require.Equal(t, []int{0}, w.others)
			})
		})
	}
}

// Leftovers keeps a provisioned load balancer by its plan's ID (its
// name), with every object under it, and tears down another one.
func TestProvisionLeftoversByName(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := shapes[0]
		eng := s.engine(0, nil)
		a, b := s.provisioned(1, 1), s.provisioned(1, 1)
		b.ID = "lb-2"
		b.Suffix = "svc-1b"
		require.NoError(t, newLB(t, eng, a, nil).Reconcile(t.Context()))
		require.NoError(t, newLB(t, eng, b, nil).Reconcile(t.Context()))
		require.NoError(t, lbrecon.TeardownExcept(t.Context(), lbrecon.Config{Engine: eng, Tag: owner, Journal: lbrecon.NoJournal}, a.ID))
		require.True(t, lbrecontest.Converged(a, owner)(eng.Objects()), "%v", eng.Objects())
		require.Len(t, eng.Objects(), objectCount(a))
	})
}

// backwards is an engine whose next listing, when armed, shows the
// load-balancer object as a replica from before the provider assigned its
// address: without its Status.
type backwards struct {
	*lbrecontest.Engine
	armed bool
}

func (b *backwards) List(ctx context.Context, q lbrecon.Query) ([]lbrecon.Object, error) {
	objs, err := b.Engine.List(ctx, q)
	if b.armed {
		b.armed = false
		for i := range objs {
			if objs[i].Kind == lbrecon.KindLoadBalancer {
				objs[i].Status = nil
			}
		}
	}
	return objs, err
}

// A listing that goes backwards to before the address was assigned takes
// nothing away: the binds on it stay, the plan stays converged, Assigned
// still reports it; in a new process that never saw the address, the
// binds stay too and the plan waits for a listing that shows it.
func TestProvisionBackwardsListingKeepsTheAddress(t *testing.T) {
	for _, s := range shapes {
		t.Run(s.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				eng := &backwards{Engine: s.engine(0, nil)}
				lb := s.provisioned(2, 2)
				r := newLB(t, eng, lb, nil)
				require.NoError(t, r.Reconcile(t.Context()))
				before := byKey(eng.Engine)
				<-time.After(2 * time.Second)
				eng.armed = true
				res, err := r.ReconcileOnce(t.Context())
				require.NoError(t, err)
				require.True(t, res.Converged, "%+v", res.Plan)
				_, _, ok := r.Assigned()
				require.True(t, ok)
				require.Equal(t, before, byKey(eng.Engine))
				require.Zero(t, eng.Calls()[lbrecon.VerbDestroy])

				// A new process, which never saw the address, neither
				// destroys the binds on it nor converges.
				fresh := newLB(t, eng, lb, nil)
				eng.armed = true
				res, err = fresh.ReconcileOnce(t.Context())
				require.NoError(t, err)
				require.False(t, res.Converged)
				require.Equal(t, before, byKey(eng.Engine))
				require.Zero(t, eng.Calls()[lbrecon.VerbDestroy])
				require.NoError(t, fresh.Reconcile(t.Context()))
				require.Equal(t, before, byKey(eng.Engine))
			})
		})
	}
}

// ghost is an engine whose listings, when armed, also show a deleted
// object, as a read replica within the lag of the deletion does.
type ghost struct {
	*lbrecontest.Engine
	mu  sync.Mutex
	obj *lbrecon.Object
}

func (g *ghost) List(ctx context.Context, q lbrecon.Query) ([]lbrecon.Object, error) {
	objs, err := g.Engine.List(ctx, q)
	g.mu.Lock()
	defer g.mu.Unlock()
	if err == nil && g.obj != nil {
		objs = append(objs, *g.obj)
	}
	return objs, err
}

// Someone deletes the load balancer; once a listing the lag after it was
// first seen misses it, the plan creates it again; a lagging replica that
// then shows the deleted one next to the new one is not believed (no
// ErrInconsistent, nothing destroyed); a new process that never saw the
// deleted one waits for a listing the lag later.
func TestProvisionDeletedLoadBalancerShownAgainByAReplica(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := shapes[0]
		eng := &ghost{Engine: s.engine(0, nil)}
		lb := s.provisioned(1, 1)
		r := newLB(t, eng, lb, nil)
		require.NoError(t, r.Reconcile(t.Context()))
		old := lbObject(t, eng.Engine)
		eng.DeleteTree(old.Key())
		<-time.After(2 * time.Second)
		for {
			res, err := r.ReconcileOnce(t.Context())
			require.NoError(t, err)
			if eng.Calls()[lbrecon.VerbCreate] > objectCount(lb) {
				break // the new load balancer
			}
			<-time.After(res.RequeueAfter)
		}
		eng.mu.Lock()
		eng.obj = &old
		eng.mu.Unlock()
		destroys := eng.Calls()[lbrecon.VerbDestroy]
		for start := time.Now(); time.Since(start) < 5*time.Second; <-time.After(200 * time.Millisecond) {
			_, err := r.ReconcileOnce(t.Context())
			require.NoError(t, err)
		}

		// A new process, which never saw the deleted one listed, waits
		// for a listing the lag later instead of failing.
		fresh := newLB(t, eng, lb, nil)
		res, err := fresh.ReconcileOnce(t.Context())
		require.NoError(t, err)
		require.False(t, res.Converged)
		require.ErrorIs(t, res.Transient, lbrecon.ErrInconsistent)
		eng.mu.Lock()
		eng.obj = nil
		eng.mu.Unlock()
		require.NoError(t, r.Reconcile(t.Context()))
		require.NoError(t, fresh.Reconcile(t.Context()))
		require.True(t, lbrecontest.Converged(lb, owner)(eng.Objects()), "%v", eng.Objects())
		require.Equal(t, destroys, eng.Calls()[lbrecon.VerbDestroy])
	})
}
