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

func (lb LoadBalancer) planLoadBalancers(_ context.Context, obs *Observation) (Changes, error) {
	var desired []Object
	if lb.Provision && !lb.teardown {
		desired = append(desired, Object{Kind: KindLoadBalancer, Name: lb.name("lb"), Spec: LoadBalancerSpec{Name: lb.ID}})
	}
	ch, err := lb.diff(obs, KindLoadBalancer, desired)
	if err != nil {
		return Changes{}, err
	}
	// The plan converges only once the provider assigned what the
	// Service's status needs.
	if o, ok := lb.lbObject(obs); ok && len(desired) > 0 && o.State == StateOK {
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
	return lb.diff(obs, KindBackend, desired)
}

func (lb LoadBalancer) planFrontends(_ context.Context, obs *Observation) (Changes, error) {
	id, ok := lb.parentID(obs)
	return lb.planPerPort(obs, KindFrontend, func(p Port, b Object) []Object {
		if !ok || lb.Listening != ListenBinds {
			return nil
		}
		return []Object{{Kind: KindFrontend, Name: lb.name(p.Name), Spec: FrontendSpec{LoadBalancer: id, DefaultBackend: b.ID}}}
	})
}

func (lb LoadBalancer) planListeners(_ context.Context, obs *Observation) (Changes, error) {
	id, ok := lb.parentID(obs)
	return lb.planPerPort(obs, KindListener, func(p Port, b Object) []Object {
		if !ok || lb.Listening != ListenPorts {
			return nil
		}
		return []Object{{Kind: KindListener, Name: lb.name(p.Name), Spec: ListenerSpec{LoadBalancer: id, DefaultBackend: b.ID, Port: p.ExternalPort}}}
	})
}

func (lb LoadBalancer) planServers(_ context.Context, obs *Observation) (Changes, error) {
	return lb.planPerPort(obs, KindServer, func(p Port, b Object) []Object {
		out := make([]Object, 0, len(lb.Targets))
		for _, t := range lb.Targets {
			out = append(out, Object{Kind: KindServer, Name: lb.name(t.Name, p.Name),
				Spec: ServerSpec{Backend: b.ID, Address: t.Address, Port: p.NodePort}})
		}
		return out
	})
}

func (lb LoadBalancer) planHealthChecks(_ context.Context, obs *Observation) (Changes, error) {
	return lb.planPerPort(obs, KindHealthCheck, func(p Port, b Object) []Object {
		hc := lb.HealthCheck
		if hc == nil {
			return nil
		}
		return []Object{{Kind: KindHealthCheck, Name: lb.name(p.Name), Spec: HealthCheckSpec{Backend: b.ID, Port: hc.Port, Path: hc.Path}}}
	})
}

func (lb LoadBalancer) planBinds(_ context.Context, obs *Observation) (Changes, error) {
	frontends, err := lb.children(obs, KindFrontend)
	if err != nil {
		return Changes{}, err
	}
	addrs := lb.addresses(obs)
	desired := make([]Object, 0, len(lb.Ports)*len(addrs))
	for _, p := range lb.Ports {
		f, ok := pick(frontends, lb.name(p.Name))
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
	if o, ok := lb.lbObject(obs); ok && !lb.teardown {
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
	return breakBinds(Diff(desired, observed, compare), observed), nil
}

// addresses returns the external addresses binds are made on: Addresses,
// and with Provision the address the provider assigned, once known.
func (lb LoadBalancer) addresses(obs *Observation) []netip.Addr {
	out := slices.Clone(lb.Addresses)
	if o, ok := lb.lbObject(obs); ok {
		if st, ok := StatusOfObject(o); ok && st.Address.IsValid() && !slices.Contains(out, st.Address) {
			out = append(out, st.Address)
		}
	}
	return out
}

// planPerPort plans the objects of kind that make gives for each port
// whose backend is observed.
func (lb LoadBalancer) planPerPort(obs *Observation, kind string, make func(p Port, backend Object) []Object) (Changes, error) {
	backends, err := lb.children(obs, KindBackend)
	if err != nil {
		return Changes{}, err
	}
	var desired []Object
	for _, p := range lb.Ports {
		if b, ok := pick(backends, lb.name(p.Name)); ok {
			desired = append(desired, make(p, b)...)
		}
	}
	return lb.diff(obs, kind, desired)
}

// diff compares desired with the observed objects of kind on this load
// balancer.
func (lb LoadBalancer) diff(obs *Observation, kind string, desired []Object) (Changes, error) {
	observed, err := lb.children(obs, kind)
	if err != nil {
		return Changes{}, err
	}
	return Diff(desired, observed, compare), nil
}

// plan runs the step of kind.
func (lb LoadBalancer) plan(ctx context.Context, kind string, obs *Observation) (Changes, error) {
	for _, st := range lb.Steps() {
		if st.Kind == kind {
			return st.Plan(ctx, obs)
		}
	}
	return Changes{}, fmt.Errorf("load balancer: no step of kind %q", kind)
}
