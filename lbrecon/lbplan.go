package lbrecon

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
)

// Steps returns the plan's steps: the load-balancer object (with
// Provision); backends after it; frontends and listeners after backends;
// binds after frontends; servers and health checks after backends (so
// they are created alongside frontends). Each object is created once its
// parents are ok: with Provision, a backend, frontend or listener waits
// for the load-balancer object.
func (lb LoadBalancer) Steps() []Step {
	r := lb.refs
	return []Step{
		{Kind: KindLoadBalancer, Plan: lb.planLoadBalancers},
		{Kind: KindBackend, DependsOn: []string{KindLoadBalancer}, Refs: r, Plan: lb.planBackends},
		{Kind: KindFrontend, DependsOn: []string{KindLoadBalancer, KindBackend}, Refs: r, Plan: lb.planFrontends},
		{Kind: KindListener, DependsOn: []string{KindLoadBalancer, KindBackend}, Refs: r, Plan: lb.planListeners},
		{Kind: KindBind, DependsOn: []string{KindFrontend}, Refs: r, Plan: lb.planBinds},
		{Kind: KindServer, DependsOn: []string{KindBackend}, Refs: r, Plan: lb.planServers},
		{Kind: KindHealthCheck, DependsOn: []string{KindBackend}, Refs: r, Plan: lb.planHealthChecks},
	}
}

// refs returns the parents of an object of the load-balancer plan: with
// Provision, the load-balancer object is the parent of backends,
// frontends and listeners.
func (lb LoadBalancer) refs(o Object) []Key {
	var out []Key
	switch s := o.Spec.(type) {
	case BackendSpec:
		return lb.lbRef(out, s.LoadBalancer)
	case FrontendSpec:
		return lb.lbRef(append(out, Key{Kind: KindBackend, ID: s.DefaultBackend}), s.LoadBalancer)
	case ListenerSpec:
		return lb.lbRef(append(out, Key{Kind: KindBackend, ID: s.DefaultBackend}), s.LoadBalancer)
	case BindSpec:
		return []Key{{Kind: KindFrontend, ID: s.Frontend}}
	case ServerSpec:
		return []Key{{Kind: KindBackend, ID: s.Backend}}
	case HealthCheckSpec:
		return []Key{{Kind: KindBackend, ID: s.Backend}}
	}
	return nil
}

func (lb LoadBalancer) lbRef(out []Key, id string) []Key {
	if lb.Provision {
		out = append(out, Key{Kind: KindLoadBalancer, ID: id})
	}
	return out
}

// refs returns the parent of an object of a load balancer that exists.
func refs(o Object) []Key { return LoadBalancer{}.refs(o) }

// compare is the load-balancer plan's comparison: a frontend's or
// listener's backend and port, a bind's port, a server's port and a
// health check's port and path change in place; a server's or bind's
// address, the load balancer of a backend, frontend or listener, and the
// parent of a bind, server or health check need a new object.
func compare(d, o Object) Verdict {
	switch ds := d.Spec.(type) {
	case LoadBalancerSpec:
		if os, ok := o.Spec.(LoadBalancerSpec); ok && os == ds {
			return UpToDate
		}
	case BackendSpec:
		if os, ok := o.Spec.(BackendSpec); ok && os == ds {
			return UpToDate
		}
	case FrontendSpec:
		os, ok := o.Spec.(FrontendSpec)
		switch {
		case !ok || os.LoadBalancer != ds.LoadBalancer:
		case os == ds:
			return UpToDate
		default:
			return Updatable
		}
	case ListenerSpec:
		os, ok := o.Spec.(ListenerSpec)
		switch {
		case !ok || os.LoadBalancer != ds.LoadBalancer:
		case os == ds:
			return UpToDate
		default:
			return Updatable
		}
	case BindSpec:
		os, ok := o.Spec.(BindSpec)
		switch {
		case !ok || os.Frontend != ds.Frontend || os.Address != ds.Address:
		case os == ds:
			return UpToDate
		default:
			return Updatable
		}
	case ServerSpec:
		os, ok := o.Spec.(ServerSpec)
		if ds.Weight == 0 {
			os.Weight = 0 // defaulted by the provider
		}
		switch {
		case !ok || os.Backend != ds.Backend || os.Address != ds.Address:
		case os == ds:
			return UpToDate
		default:
			return Updatable
		}
	case HealthCheckSpec:
		os, ok := o.Spec.(HealthCheckSpec)
		switch {
		case !ok || os.Backend != ds.Backend:
		case os == ds:
			return UpToDate
		default:
			return Updatable
		}
	}
	return Replace
}

// parent returns the kept object of kind named name on this load balancer.
// Earlier steps removed duplicates and stale objects from obs, so at most a
// few candidates remain; the best one is taken.
func parent(objs []Object, name string) (Object, bool) {
	var best Object
	found := false
	for _, o := range objs {
		if o.Name == name && (!found || better(o, best)) {
			best, found = o, true
		}
	}
	return best, found
}

// children returns the observed objects of kind on this load balancer. A
// parent missing from the listing altogether is an inconsistent answer.
func (lb LoadBalancer) children(obs *Observation, kind string) ([]Object, error) {
	var out []Object
	for _, o := range obs.Objects(kind) {
		mine, err := lb.onThisLB(obs, o)
		if err != nil {
			return nil, err
		}
		if mine {
			out = append(out, o)
		}
	}
	return out, nil
}

// onThisLB reports whether o is on this load balancer: the load-balancer
// object by its name; without Provision, a backend, frontend or listener
// by the ID in its spec; every other object through its parents, one that
// this plan or an earlier call destroys (listed, not observed) counting
// as this load balancer's.
func (lb LoadBalancer) onThisLB(obs *Observation, o Object) (bool, error) {
	switch s := o.Spec.(type) {
	case LoadBalancerSpec:
		return s.Name == lb.ID, nil
	case BackendSpec:
		return lb.onLB(obs, o, s.LoadBalancer)
	case FrontendSpec:
		if mine, err := lb.onLB(obs, o, s.LoadBalancer); err != nil || !mine || !lb.Provision {
			return mine, err
		}
	case ListenerSpec:
		if mine, err := lb.onLB(obs, o, s.LoadBalancer); err != nil || !mine || !lb.Provision {
			return mine, err
		}
	}
	parents := lb.refs(o)
	for _, k := range parents {
		if !obs.Known(k) {
			return false, fmt.Errorf("%w: %v refers to %v, which is not listed", errParentNotListed, o, k)
		}
		if p, ok := obs.Get(k); ok {
			if mine, err := lb.onThisLB(obs, p); err != nil || !mine {
				return false, err
			}
		}
	}
	return len(parents) > 0, nil
}

// onLB reports whether o, a backend, frontend or listener on the load
// balancer id, is on this one: id is this plan's (without Provision), or
// that of a load-balancer object of this plan (listed, or listed and
// going away). A teardown without Provision thus takes down the children
// of a load-balancer object of its ID too. With Provision, a
// load-balancer object missing from the listing is an inconsistent
// answer.
func (lb LoadBalancer) onLB(obs *Observation, o Object, id string) (bool, error) {
	if !lb.Provision && id == lb.ID {
		return true, nil
	}
	k := Key{Kind: KindLoadBalancer, ID: id}
	if p, ok := obs.Get(k); ok {
		return lb.onThisLB(obs, p)
	}
	if obs.Known(k) {
		return true, nil
	}
	if lb.Provision {
		return false, fmt.Errorf("%w: %v refers to %v, which is not listed", errParentNotListed, o, k)
	}
	return false, nil
}

// mine reports whether o is on this load balancer; an inconsistent
// listing is not.
func (lb LoadBalancer) mine(obs *Observation, o Object) bool {
	ok, err := lb.onThisLB(obs, o)
	return ok && err == nil
}

// object returns this plan's load-balancer object, when Provision is set
// and one is observed.
func (lb LoadBalancer) object(obs *Observation) (Object, bool) {
	if !lb.Provision {
		return Object{}, false
	}
	lbs, err := lb.children(obs, KindLoadBalancer)
	if err != nil {
		return Object{}, false
	}
	return parent(lbs, lb.name("lb"))
}

// parentID returns the ID backends, frontends and listeners carry: the
// load-balancer object's with Provision (false while there is none), else
// the plan's ID.
func (lb LoadBalancer) parentID(obs *Observation) (string, bool) {
	if !lb.Provision {
		return lb.ID, true
	}
	o, ok := lb.object(obs)
	return o.ID, ok
}

func (lb LoadBalancer) planLoadBalancers(_ context.Context, obs *Observation) (Changes, error) {
	var desired []Object
	if lb.Provision && !lb.teardown {
		desired = append(desired, Object{Kind: KindLoadBalancer, Name: lb.name("lb"), Spec: LoadBalancerSpec{Name: lb.ID}})
	}
	observed, err := lb.children(obs, KindLoadBalancer)
	if err != nil {
		return Changes{}, err
	}
	ch := Diff(desired, observed, compare)
	// The plan converges only once the provider assigned what the
	// Service's status needs.
	if o, ok := lb.object(obs); ok && len(desired) > 0 && o.State == StateOK {
		if _, known := StatusOfObject(o); !known {
			ch.Wait = append(ch.Wait, o)
		}
	}
	return ch, nil
}

func (lb LoadBalancer) planBackends(_ context.Context, obs *Observation) (Changes, error) {
	var desired []Object
	if id, ok := lb.parentID(obs); ok {
		for _, p := range lb.Ports {
			desired = append(desired, Object{Kind: KindBackend, Name: lb.name(p.Name), Spec: BackendSpec{LoadBalancer: id}})
		}
	}
	observed, err := lb.children(obs, KindBackend)
	if err != nil {
		return Changes{}, err
	}
	return Diff(desired, observed, compare), nil
}

// perPort returns, for each port whose backend is observed, the object
// make gives; nil objects are left out.
func (lb LoadBalancer) perPort(obs *Observation, make func(p Port, backend Object) []Object) ([]Object, error) {
	backends, err := lb.children(obs, KindBackend)
	if err != nil {
		return nil, err
	}
	var out []Object
	for _, p := range lb.Ports {
		if b, ok := parent(backends, lb.name(p.Name)); ok {
			out = append(out, make(p, b)...)
		}
	}
	return out, nil
}

func (lb LoadBalancer) planFrontends(_ context.Context, obs *Observation) (Changes, error) {
	id, ok := lb.parentID(obs)
	desired, err := lb.perPort(obs, func(p Port, b Object) []Object {
		if !ok || lb.Listening != ListenBinds {
			return nil
		}
		return []Object{{Kind: KindFrontend, Name: lb.name(p.Name), Spec: FrontendSpec{LoadBalancer: id, DefaultBackend: b.ID}}}
	})
	if err != nil {
		return Changes{}, err
	}
	observed, err := lb.children(obs, KindFrontend)
	if err != nil {
		return Changes{}, err
	}
	return Diff(desired, observed, compare), nil
}

func (lb LoadBalancer) planListeners(_ context.Context, obs *Observation) (Changes, error) {
	id, ok := lb.parentID(obs)
	desired, err := lb.perPort(obs, func(p Port, b Object) []Object {
		if !ok || lb.Listening != ListenPorts {
			return nil
		}
		return []Object{{Kind: KindListener, Name: lb.name(p.Name), Spec: ListenerSpec{LoadBalancer: id, DefaultBackend: b.ID, Port: p.ExternalPort}}}
	})
	if err != nil {
		return Changes{}, err
	}
	observed, err := lb.children(obs, KindListener)
	if err != nil {
		return Changes{}, err
	}
	return Diff(desired, observed, compare), nil
}

// addresses returns the external addresses binds are made on: Addresses,
// and with Provision the address the provider assigned, once known.
func (lb LoadBalancer) addresses(obs *Observation) []netip.Addr {
	out := slices.Clone(lb.Addresses)
	if o, ok := lb.object(obs); ok {
		if st, ok := StatusOfObject(o); ok && st.Address.IsValid() && !slices.Contains(out, st.Address) {
			out = append(out, st.Address)
		}
	}
	return out
}

func (lb LoadBalancer) planBinds(_ context.Context, obs *Observation) (Changes, error) {
	frontends, err := lb.children(obs, KindFrontend)
	if err != nil {
		return Changes{}, err
	}
	addrs := lb.addresses(obs)
	desired := make([]Object, 0, len(lb.Ports)*len(addrs))
	for _, p := range lb.Ports {
		f, ok := parent(frontends, lb.name(p.Name))
		if !ok {
			continue
		}
		for _, a := range addrs {
			desired = append(desired, Object{Kind: KindBind, Name: lb.name(a.String(), p.Name),
				Spec: BindSpec{Frontend: f.ID, Address: a, Port: p.ExternalPort}})
		}
	}
	observed, err := lb.children(obs, KindBind)
	if err != nil {
		return Changes{}, err
	}
	if o, ok := lb.object(obs); ok && !lb.teardown {
		if _, known := StatusOfObject(o); !known {
			// A listing from before the address was assigned (a replica,
			// seen by a process that has not seen it yet): binds on
			// another address than Addresses may be on it, and are kept
			// until a listing tells.
			for _, b := range observed {
				if s, ok := b.Spec.(BindSpec); ok && !slices.Contains(lb.Addresses, s.Address) {
					desired = append(desired, Object{Kind: KindBind, Name: b.Name, Spec: b.Spec})
				}
			}
		}
	}
	return unblockListeners(Diff(desired, observed, compare), observed), nil
}

func (lb LoadBalancer) planServers(_ context.Context, obs *Observation) (Changes, error) {
	desired, err := lb.perPort(obs, func(p Port, b Object) []Object {
		out := make([]Object, 0, len(lb.Targets))
		for _, t := range lb.Targets {
			out = append(out, Object{Kind: KindServer, Name: lb.name(t.Name, p.Name),
				Spec: ServerSpec{Backend: b.ID, Address: t.Address, Port: p.NodePort}})
		}
		return out
	})
	if err != nil {
		return Changes{}, err
	}
	observed, err := lb.children(obs, KindServer)
	if err != nil {
		return Changes{}, err
	}
	return Diff(desired, observed, compare), nil
}

func (lb LoadBalancer) planHealthChecks(_ context.Context, obs *Observation) (Changes, error) {
	desired, err := lb.perPort(obs, func(p Port, b Object) []Object {
		hc := lb.HealthCheck
		if hc == nil {
			return nil
		}
		return []Object{{Kind: KindHealthCheck, Name: lb.name(p.Name), Spec: HealthCheckSpec{Backend: b.ID, Port: hc.Port, Path: hc.Path}}}
	})
	if err != nil {
		return Changes{}, err
	}
	observed, err := lb.children(obs, KindHealthCheck)
	if err != nil {
		return Changes{}, err
	}
	return Diff(desired, observed, compare), nil
}

// plan runs the step of kind.
func (lb LoadBalancer) plan(ctx context.Context, kind string, obs *Observation) (Changes, error) {
	switch kind {
	case KindLoadBalancer:
		return lb.planLoadBalancers(ctx, obs)
	case KindBackend:
		return lb.planBackends(ctx, obs)
	case KindFrontend:
		return lb.planFrontends(ctx, obs)
	case KindListener:
		return lb.planListeners(ctx, obs)
	case KindBind:
		return lb.planBinds(ctx, obs)
	case KindHealthCheck:
		return lb.planHealthChecks(ctx, obs)
	}
	return lb.planServers(ctx, obs)
}
