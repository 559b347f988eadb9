package lbrecon

import (
	"context"
	"fmt"
)

// Steps returns the plan's steps: backends; frontends after backends;
// binds after frontends; servers after backends (so servers are created
// alongside frontends). Each object is created once its parent is ok.
func (lb LoadBalancer) Steps() []Step {
	return []Step{
		{Kind: KindBackend, Plan: lb.planBackends},
		{Kind: KindFrontend, DependsOn: []string{KindBackend}, Refs: refs, Plan: lb.planFrontends},
		{Kind: KindBind, DependsOn: []string{KindFrontend}, Refs: refs, Plan: lb.planBinds},
		{Kind: KindServer, DependsOn: []string{KindBackend}, Refs: refs, Plan: lb.planServers},
	}
}

// refs returns the parent of an object of the load-balancer plan.
func refs(o Object) []Key {
	switch s := o.Spec.(type) {
	case FrontendSpec:
		return []Key{{Kind: KindBackend, ID: s.DefaultBackend}}
	case BindSpec:
		return []Key{{Kind: KindFrontend, ID: s.Frontend}}
	case ServerSpec:
		return []Key{{Kind: KindBackend, ID: s.Backend}}
	}
	return nil
}

// compare is the load-balancer plan's comparison: a frontend's backend, a
// bind's port and a server's port change in place; a server's or bind's
// address, and the parent of a bind or server, need a new object.
func compare(d, o Object) Verdict {
	switch ds := d.Spec.(type) {
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
	}
	return Replace
}

// ours returns the observed objects of a kind on this load balancer.
func ours[S BackendSpec | FrontendSpec](lb LoadBalancer, obs *Observation, kind string, loadBalancer func(S) string) []Object {
	var out []Object
	for _, o := range obs.Objects(kind) {
		if s, ok := o.Spec.(S); ok && loadBalancer(s) == lb.ID {
			out = append(out, o)
		}
	}
	return out
}

func (lb LoadBalancer) planBackends(_ context.Context, obs *Observation) (Changes, error) {
	desired := make([]Object, 0, len(lb.Ports))
	for _, p := range lb.Ports {
		desired = append(desired, Object{Kind: KindBackend, Name: lb.name(p.Name), Spec: BackendSpec{LoadBalancer: lb.ID}})
	}
	return Diff(desired, ours(lb, obs, KindBackend, func(s BackendSpec) string { return s.LoadBalancer }), compare), nil
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

func (lb LoadBalancer) planFrontends(_ context.Context, obs *Observation) (Changes, error) {
	backends := ours(lb, obs, KindBackend, func(s BackendSpec) string { return s.LoadBalancer })
	desired := make([]Object, 0, len(lb.Ports))
	for _, p := range lb.Ports {
		b, ok := parent(backends, lb.name(p.Name))
		if !ok {
			continue
		}
		desired = append(desired, Object{Kind: KindFrontend, Name: lb.name(p.Name),
			Spec: FrontendSpec{LoadBalancer: lb.ID, DefaultBackend: b.ID}})
	}
	return Diff(desired, ours(lb, obs, KindFrontend, func(s FrontendSpec) string { return s.LoadBalancer }), compare), nil
}

// children returns the observed objects of kind, leaving out those whose
// parent is an object of another load balancer. A parent missing from the
// listing altogether is an inconsistent answer.
func (lb LoadBalancer) children(obs *Observation, kind string) ([]Object, error) {
	var out []Object
	for _, o := range obs.Objects(kind) {
		mine := true
		for _, k := range refs(o) {
			if !obs.Known(k) {
				return nil, fmt.Errorf("%w: %v refers to %v, which is not listed", errParentNotListed, o, k)
			}
			if p, ok := obs.Get(k); ok && !lb.onThisLB(p) {
				mine = false
			}
		}
		if mine {
			out = append(out, o)
		}
	}
	return out, nil
}

func (lb LoadBalancer) onThisLB(o Object) bool {
	switch s := o.Spec.(type) {
	case BackendSpec:
		return s.LoadBalancer == lb.ID
	case FrontendSpec:
		return s.LoadBalancer == lb.ID
	}
	return false
}

func (lb LoadBalancer) planBinds(_ context.Context, obs *Observation) (Changes, error) {
	frontends := ours(lb, obs, KindFrontend, func(s FrontendSpec) string { return s.LoadBalancer })
	desired := make([]Object, 0, len(lb.Ports)*len(lb.Addresses))
	for _, p := range lb.Ports {
		f, ok := parent(frontends, lb.name(p.Name))
		if !ok {
			continue
		}
		for _, a := range lb.Addresses {
			desired = append(desired, Object{Kind: KindBind, Name: lb.name(a.String(), p.Name),
				Spec: BindSpec{Frontend: f.ID, Address: a, Port: p.ExternalPort}})
		}
	}
	observed, err := lb.children(obs, KindBind)
	if err != nil {
		return Changes{}, err
	}
	return unblockListeners(Diff(desired, observed, compare), observed), nil
}

func (lb LoadBalancer) planServers(_ context.Context, obs *Observation) (Changes, error) {
	backends := ours(lb, obs, KindBackend, func(s BackendSpec) string { return s.LoadBalancer })
	desired := make([]Object, 0, len(lb.Ports)*len(lb.Targets))
	for _, p := range lb.Ports {
		b, ok := parent(backends, lb.name(p.Name))
		if !ok {
			continue
		}
		for _, t := range lb.Targets {
			desired = append(desired, Object{Kind: KindServer, Name: lb.name(t.Name, p.Name),
				Spec: ServerSpec{Backend: b.ID, Address: t.Address, Port: p.NodePort}})
		}
	}
	observed, err := lb.children(obs, KindServer)
	if err != nil {
		return Changes{}, err
	}
	return Diff(desired, observed, compare), nil
}

// plan runs the step of kind.
func (lb LoadBalancer) plan(ctx context.Context, kind string, obs *Observation) (Changes, error) {
	switch kind {
	case KindBackend:
		return lb.planBackends(ctx, obs)
	case KindFrontend:
		return lb.planFrontends(ctx, obs)
	case KindBind:
		return lb.planBinds(ctx, obs)
	}
	return lb.planServers(ctx, obs)
}
