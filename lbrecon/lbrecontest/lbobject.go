package lbrecontest

import (
	"net/netip"
	"time"

	"github.com/reconkit/reconkit/lbrecon"
)

// ELB returns cfg shaped like ELB or Octavia: load-balancer objects with
// a provider-assigned address and DNS name (LoadBalancerObjects),
// references enforced (Integrity); names are not unique, as on Octavia
// (set UniqueNames for ELB's), so only the reconciler keeps a crash from
// making a second load balancer. A plan drives
// it with [lbrecon.LoadBalancer.Provision] and [lbrecon.ListenPorts]:
// a load balancer, per port a pool (backend), a listener (frontend and
// port), members (servers) and a health monitor (health check).
func ELB(cfg Config) Config {
	cfg.LoadBalancerObjects, cfg.Integrity = true, true
	return cfg
}

// HAProxy returns cfg shaped like an HAProxy fleet whose instances the
// provider allocates: a load-balancer object (an instance) with an
// assigned address, frontends with a bind per address and port, refused
// twice on one address and port (UniqueBinds), backends with servers,
// references enforced. A plan drives it with
// [lbrecon.LoadBalancer.Provision] and [lbrecon.ListenBinds].
func HAProxy(cfg Config) Config {
	cfg.LoadBalancerObjects, cfg.Integrity, cfg.UniqueBinds = true, true, true
	return cfg
}

// LoadBalancerObjectRefs is [LoadBalancerRefs] with the load-balancer
// object as the parent of backends, frontends and listeners
// (Config.LoadBalancerObjects).
func LoadBalancerObjectRefs(o lbrecon.Object) []lbrecon.Key {
	out := LoadBalancerRefs(o)
	switch s := o.Spec.(type) {
	case lbrecon.BackendSpec:
		out = append(out, lbrecon.Key{Kind: lbrecon.KindLoadBalancer, ID: s.LoadBalancer})
	case lbrecon.FrontendSpec:
		out = append(out, lbrecon.Key{Kind: lbrecon.KindLoadBalancer, ID: s.LoadBalancer})
	case lbrecon.ListenerSpec:
		out = append(out, lbrecon.Key{Kind: lbrecon.KindLoadBalancer, ID: s.LoadBalancer})
	}
	return out
}

// assign draws o's assigned status (Config.AssignVIP, or a
// load-balancer object's address and DNS name), shown once o is ok and
// VIPDelay has passed. Called with e.mu held.
func (e *Engine) assign(o *object) {
	var st any
	var ok bool
	switch {
	case e.cfg.AssignVIP != nil:
		st, ok = e.cfg.AssignVIP(o.Object, e.nextVIP())
	case e.cfg.LoadBalancerObjects && o.Kind == lbrecon.KindLoadBalancer:
		s, _ := o.Spec.(lbrecon.LoadBalancerSpec)
		st, ok = lbrecon.LoadBalancerStatus{Address: e.nextVIP(), Hostname: s.Name + ".lb.example"}, true
	}
	if ok {
		e.vips++
		o.assigned, o.assignAt = st, o.readyAt.Add(e.cfg.VIPDelay)
	}
}

// Reassign gives the load-balancer object with key k a new address, as a
// provider that moves a VIP does (the DNS name is kept), outside the API;
// listings show it as they lag. It returns the new address, and false
// when there is no such object with an assigned status.
func (e *Engine) Reassign(k lbrecon.Key) (netip.Addr, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	o, ok := e.objs[k]
	if !ok {
		return netip.Addr{}, false
	}
	st, ok := lbrecon.StatusOfObject(o.Object)
	if !ok {
		return netip.Addr{}, false
	}
	e.remember(o)
	st.Address = e.nextVIP()
	e.vips++
	o.Status = st
	e.notify()
	return st.Address, true
}

// DeleteTree removes the object with key k and every object that refers
// to it, directly or not (Refs), outside the API and at once, as a
// provider's cascading delete or an operator does; it returns how many
// objects it removed.
func (e *Engine) DeleteTree(k lbrecon.Key) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	gone := map[lbrecon.Key]bool{}
	if _, ok := e.objs[k]; ok {
		gone[k] = true
	}
	for grew := true; grew; {
		grew = false
		for ck, c := range e.objs {
			if gone[ck] {
				continue
			}
			for _, p := range e.cfg.Refs(c.Object) {
				if gone[p] {
					gone[ck], grew = true, true
					break
				}
			}
		}
	}
	for g := range gone {
		delete(e.objs, g)
	}
	e.track()
	return len(gone)
}

// assignedAt returns when o's assigned status shows (zero: none pending).
func (o *object) assignedAt() time.Time {
	if o.assigned == nil {
		return time.Time{}
	}
	return o.assignAt
}
