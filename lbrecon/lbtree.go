package lbrecon

import (
	"fmt"
)

// attachedTo returns the load balancer a backend, frontend or listener
// names in its spec; other objects name none.
func attachedTo(o Object) (id string, ok bool) {
	switch s := o.Spec.(type) {
	case BackendSpec:
		return s.LoadBalancer, true
	case FrontendSpec:
		return s.LoadBalancer, true
	case ListenerSpec:
		return s.LoadBalancer, true
	}
	return "", false
}

// refs returns the parents of an object of the load-balancer plan: a
// frontend's or listener's backend, a bind's frontend, a server's or
// health check's backend and, with Provision, the load-balancer object
// of a backend, frontend or listener.
func (lb LoadBalancer) refs(o Object) []Key {
	var out []Key
	switch s := o.Spec.(type) {
	case FrontendSpec:
		out = append(out, Key{Kind: KindBackend, ID: s.DefaultBackend})
	case ListenerSpec:
		out = append(out, Key{Kind: KindBackend, ID: s.DefaultBackend})
	case BindSpec:
		return []Key{{Kind: KindFrontend, ID: s.Frontend}}
	case ServerSpec:
		return []Key{{Kind: KindBackend, ID: s.Backend}}
	case HealthCheckSpec:
		return []Key{{Kind: KindBackend, ID: s.Backend}}
	}
	if id, ok := attachedTo(o); ok && lb.Provision {
		out = append(out, Key{Kind: KindLoadBalancer, ID: id})
	}
	return out
}

// refs returns the parents of an object of a load balancer that exists.
func refs(o Object) []Key { return LoadBalancer{}.refs(o) }

// pick returns the object named name among objs, one kind's objects on
// this load balancer. There is at most one: the observation a step plans
// from holds neither the objects earlier steps destroy (a replaced or
// failed object, a duplicate past the lag) nor, within the lag, a
// duplicate (the pass stops with errDuplicateListed), and a load
// balancer's children of one kind differ in name.
func pick(objs []Object, name string) (Object, bool) {
	for _, o := range objs {
		if o.Name == name {
			return o, true
		}
	}
	return Object{}, false
}

// children returns the observed objects of kind on this load balancer. A
// parent missing from the listing altogether is an inconsistent answer.
func (lb LoadBalancer) children(obs *Observation, kind string) ([]Object, error) {
	var out []Object
	for _, o := range obs.Objects(kind) {
		mine, err := lb.has(obs, o)
		if err != nil {
			return nil, err
		}
		if mine {
			out = append(out, o)
		}
	}
	return out, nil
}

// has reports whether o is on this load balancer: the load-balancer
// object by its name; a backend, frontend or listener by the load
// balancer its spec names ([LoadBalancer.hasID]) and, with Provision, a
// frontend or listener by its backend too; every other object through its
// parents, one that this plan or an earlier call destroys (listed, not
// observed) counting as this load balancer's. An orphan, an owned object
// whose parent is gone (see Observation.orphan),
// counts as this load balancer's too: no desired object refers to a gone
// parent, so the plan destroys it.
func (lb LoadBalancer) has(obs *Observation, o Object) (bool, error) {
	if s, ok := o.Spec.(LoadBalancerSpec); ok {
		return s.Name == lb.ID, nil
	}
	if id, ok := attachedTo(o); ok {
		_, backend := o.Spec.(BackendSpec)
		if mine, err := lb.hasID(obs, o, id); err != nil || !mine || !lb.Provision || backend {
			return mine, err
		}
	}
	parents := lb.refs(o)
	for _, k := range parents {
		if !obs.Known(k) {
			if obs.orphan(o) {
				return true, nil
			}
			return false, fmt.Errorf("%w: %v refers to %v, which is not listed", errParentNotListed, o, k)
		}
		if p, ok := obs.Get(k); ok {
			if mine, err := lb.has(obs, p); err != nil || !mine {
				return false, err
			}
		}
	}
	return len(parents) > 0, nil
}

// hasID reports whether o, a backend, frontend or listener on the load
// balancer id, is on this one: id is this plan's (without Provision), or
// that of a load-balancer object of this plan (listed, or listed and
// going away). A teardown without Provision thus takes down the children
// of a load-balancer object of its ID too. With Provision, a
// load-balancer object missing from the listing is an inconsistent
// answer.
func (lb LoadBalancer) hasID(obs *Observation, o Object, id string) (bool, error) {
	if !lb.Provision && id == lb.ID {
		return true, nil
	}
	k := Key{Kind: KindLoadBalancer, ID: id}
	if p, ok := obs.Get(k); ok {
		return lb.has(obs, p)
	}
	if obs.Known(k) {
		return true, nil
	}
	if lb.Provision {
		if obs.orphan(o) {
			return true, nil
		}
		return false, fmt.Errorf("%w: %v refers to %v, which is not listed", errParentNotListed, o, k)
	}
	return false, nil
}

// lbObject returns this plan's load-balancer object, when Provision is set
// and one is observed.
func (lb LoadBalancer) lbObject(obs *Observation) (Object, bool) {
	if !lb.Provision {
		return Object{}, false
	}
	lbs, err := lb.children(obs, KindLoadBalancer)
	if err != nil {
		return Object{}, false
	}
	return pick(lbs, lb.name("lb"))
}

// parentID returns the ID backends, frontends and listeners carry: the
// load-balancer object's with Provision (false while there is none), else
// the plan's ID.
func (lb LoadBalancer) parentID(obs *Observation) (string, bool) {
	if !lb.Provision {
		return lb.ID, true
	}
	o, ok := lb.lbObject(obs)
	return o.ID, ok
}

// orphan reports whether o, listed without a parent, is an orphan: its
// parent is gone, since a listing that o's lag horizon reached does not
// show it either (see Reconciler.orphans).
func (o *Observation) orphan(obj Object) bool { return o.orphans[obj.Key()] }
