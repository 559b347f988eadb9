package lbrecon

import (
	"fmt"
)

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
