package lbrecon

import (
	"context"
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
