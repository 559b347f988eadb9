package lbrecon

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"sync"
)

// LoadBalancerReconciler is a [Reconciler] running a [LoadBalancer] plan.
type LoadBalancerReconciler struct {
	*Reconciler
	mu       sync.Mutex
	lb       LoadBalancer
	assigned LoadBalancerStatus // as the last pass saw it (Provision)
	lbID     string             // the load-balancer object's ID, as the last pass saw it
}

// NewLoadBalancer validates lb and returns a reconciler for it. cfg.Steps
// and cfg.Scope are set from lb (Scope is the load balancer's ID);
// everything else in cfg is used as given. Keep one reconciler per load
// balancer for as long as the host manages it, and give it new
// descriptions with SetLoadBalancer: it remembers unconfirmed writes,
// failure counts and how long the provider takes between calls.
func NewLoadBalancer(cfg Config, lb LoadBalancer) (*LoadBalancerReconciler, error) {
	if err := lb.Validate(); err != nil {
		return nil, err
	}
	lr := &LoadBalancerReconciler{lb: lb.clone()}
	steps := lb.Steps()
	for i := range steps {
		kind := steps[i].Kind
		steps[i].Plan = func(ctx context.Context, obs *Observation) (Changes, error) {
			lb := lr.current()
			if kind == KindLoadBalancer {
				lr.note(lb, obs)
			}
			return lb.plan(ctx, kind, obs)
		}
	}
	cfg.Steps, cfg.Scope = steps, lb.ID
	r, err := New(cfg)
	if err != nil {
		return nil, err
	}
	r.down = func(st Step) func(context.Context, *Observation) (Changes, error) {
		return func(ctx context.Context, obs *Observation) (Changes, error) {
			lb := lr.current()
			lb.Ports, lb.teardown = nil, true
			if st.Kind == KindLoadBalancer {
				lr.note(lb, obs)
			}
			return lb.plan(ctx, st.Kind, obs)
		}
	}
	lr.Reconciler = r
	return lr, nil
}

// Teardown destroys every object this reconciler owns on its load balancer
// (backends and frontends of its ID, and their binds and servers) and waits
// until a listing shows them gone; see [Reconciler.Teardown]. Objects of
// other load balancers carrying the same tag are left alone. A host calls
// it when the load balancer is removed, or on the old reconciler when the
// load balancer's ID changes (the new ID gets a new reconciler); when that
// reconciler is gone (a restart, a failover), [TeardownExcept] finds the
// old load balancers by the tag. The
// description is kept: a later Reconcile creates it again.
func (r *LoadBalancerReconciler) Teardown(ctx context.Context) error {
	return r.Reconciler.Teardown(ctx)
}

// TeardownOnce is the non-blocking [LoadBalancerReconciler.Teardown], for a
// host's requeue loop; see [Reconciler.TeardownOnce].
func (r *LoadBalancerReconciler) TeardownOnce(ctx context.Context) (Result, error) {
	return r.Reconciler.TeardownOnce(ctx)
}

// SetLoadBalancer replaces the desired description; the next pass plans for
// it. The load balancer's ID cannot change (it is the scope of every
// listing): tear the old one down with Teardown, and make a new reconciler
// for the new ID.
func (r *LoadBalancerReconciler) SetLoadBalancer(lb LoadBalancer) error {
	if err := lb.Validate(); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if lb.ID != r.lb.ID {
		return fmt.Errorf("%w: load balancer ID %q cannot change to %q", ErrInvalidConfig, r.lb.ID, lb.ID)
	}
	if lb.Provision != r.lb.Provision {
		return fmt.Errorf("%w: load balancer %q: Provision cannot change", ErrInvalidConfig, lb.ID)
	}
	r.lb = lb.clone()
	return nil
}

func (r *LoadBalancerReconciler) current() LoadBalancer {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lb
}

// note records what the provider assigned to the load-balancer object,
// as obs shows it: a listing that does not show the object (a teardown,
// or the object gone) clears it. A stale observation, from a listing that
// started before one already merged, changes nothing: it may predate the
// object's creation, or its teardown.
func (r *LoadBalancerReconciler) note(lb LoadBalancer, obs *Observation) {
	if obs.stale {
		return
	}
	o, ok := lb.lbObject(obs)
	st, _ := StatusOfObject(o)
	r.mu.Lock()
	defer r.mu.Unlock()
	if !ok || lb.teardown {
		st, o = LoadBalancerStatus{}, Object{}
	}
	r.assigned, r.lbID = st, o.ID
}

// Assigned returns, with [LoadBalancer.Provision], what the provider
// assigned to the load-balancer object (its address, its DNS name) and
// the object's ID, as the newest listing a pass (Reconcile, ReconcileOnce,
// Check) merged saw them: a Check whose listing started before one
// already merged changes nothing here, whenever it returns. ok is false
// while the provider has assigned nothing. A host
// publishes the address only once a pass converged: the plan waits for
// it. Without Provision it reports nothing.
func (r *LoadBalancerReconciler) Assigned() (st LoadBalancerStatus, id string, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.assigned, r.lbID, r.assigned.Known()
}

// Status lists once and returns, for every external address with a bind on
// one of this plan's frontends, or with Provision the load balancer's
// assigned address with a listener, the external ports bound there,
// sorted.
func (r *LoadBalancerReconciler) Status(ctx context.Context) (map[netip.Addr][]uint16, error) {
	obs, err := r.Observe(ctx)
	if err != nil {
		return nil, err
	}
	return StatusOf(r.current(), obs), nil
}

// StatusOf computes the address-to-ports map of [LoadBalancerReconciler.Status]
// from an observation: binds on this plan's frontends, and with Provision
// the ports of its listeners on the address the provider assigned.
func StatusOf(lb LoadBalancer, obs *Observation) map[netip.Addr][]uint16 {
	out := make(map[netip.Addr][]uint16)
	has := func(o Object) bool { // an inconsistent listing shows nothing of ours
		ok, err := lb.has(obs, o)
		return ok && err == nil
	}
	for _, b := range obs.Objects(KindBind) {
		s, ok := b.Spec.(BindSpec)
		if !ok {
			continue
		}
		if f, ok := obs.Get(Key{Kind: KindFrontend, ID: s.Frontend}); !ok || f.Kind != KindFrontend || !has(f) {
			continue
		}
		if !slices.Contains(out[s.Address], s.Port) {
			out[s.Address] = append(out[s.Address], s.Port)
		}
	}
	// Listeners listen on the load balancer's assigned address.
	if o, ok := lb.lbObject(obs); ok {
		if st, ok := StatusOfObject(o); ok && st.Address.IsValid() {
			for _, l := range obs.Objects(KindListener) {
				if s, ok := l.Spec.(ListenerSpec); ok && has(l) && !slices.Contains(out[st.Address], s.Port) {
					out[st.Address] = append(out[st.Address], s.Port)
				}
			}
		}
	}
	for _, ports := range out {
		slices.Sort(ports)
	}
	return out
}
