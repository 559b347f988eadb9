package lbrecon

import (
	"net/netip"
)

// Kinds of the load-balancer plan.
const (
	// KindLoadBalancer is the provider's load-balancer object itself,
	// created first when [LoadBalancer.Provision] is set.
	KindLoadBalancer = "loadbalancer"
	KindBackend      = "backend"
	KindFrontend     = "frontend"
	KindBind         = "bind"
	// KindListener is a frontend with a port of its own, listening on the
	// load balancer's address ([ListenPorts]): an ELB or Octavia listener.
	KindListener = "listener"
	KindServer   = "server"
	// KindHealthCheck is a backend's health check ([LoadBalancer.HealthCheck]).
	KindHealthCheck = "healthcheck"
)

// LoadBalancerSpec describes the provider's load-balancer object, which
// the plan creates when [LoadBalancer.Provision] is set.
type LoadBalancerSpec struct {
	// Name is the plan's [LoadBalancer.ID]; the provider assigns the
	// object's own identifier.
	Name string
}

// BackendSpec describes a backend: a pool of servers on a load balancer.
type BackendSpec struct {
	LoadBalancer string
}

// FrontendSpec describes a frontend on a load balancer forwarding to a backend.
type FrontendSpec struct {
	LoadBalancer   string
	DefaultBackend string // the backend's ID
}

// ListenerSpec describes a listener: a frontend on a load balancer that
// listens on the load balancer's address at Port and forwards to a
// backend.
type ListenerSpec struct {
	LoadBalancer   string
	DefaultBackend string // the backend's ID
	Port           uint16
}

// BindSpec describes a frontend listening on an external address and port.
type BindSpec struct {
	Frontend string // the frontend's ID
	Address  netip.Addr
	Port     uint16
}

// ServerSpec describes a target server in a backend.
type ServerSpec struct {
	Backend string // the backend's ID
	Address netip.Addr
	Port    uint16
	// Weight is the server's share of traffic; 0 asks for the provider's
	// default, and then any weight the provider reports is up to date.
	Weight uint16
}

// HealthCheckSpec describes a backend's health check: an HTTP GET of Path
// on Port of every server's address.
type HealthCheckSpec struct {
	Backend string // the backend's ID
	Port    uint16
	Path    string
}

// LoadBalancerStatus is what a provider assigns to a load-balancer object
// ([Object.Status]) once it has it: an address (a VIP), a DNS name, or
// both. An engine reports it as a LoadBalancerStatus or a pointer to one.
type LoadBalancerStatus struct {
	Address  netip.Addr
	Hostname string
}

// Known reports whether the provider assigned an address or a DNS name.
func (s LoadBalancerStatus) Known() bool { return s.Address.IsValid() || s.Hostname != "" }

// StatusOfObject returns the [LoadBalancerStatus] o reports, if any.
func StatusOfObject(o Object) (LoadBalancerStatus, bool) {
	switch s := o.Status.(type) {
	case LoadBalancerStatus:
		return s, s.Known()
	case *LoadBalancerStatus:
		if s != nil {
			return *s, s.Known()
		}
	}
	return LoadBalancerStatus{}, false
}

// compare is the load-balancer plan's comparison: a frontend's or
// listener's backend and port, a bind's port, a server's port and a
// health check's port and path change in place; a server's or bind's
// address, the load balancer of a backend, frontend or listener, and the
// parent of a bind, server or health check need a new object.
func compare(d, o Object) Verdict {
	switch ds := d.Spec.(type) {
	case LoadBalancerSpec:
		return compareSpec(ds, o, func(os LoadBalancerSpec) bool { return os == ds })
	case BackendSpec:
		return compareSpec(ds, o, func(os BackendSpec) bool { return os == ds })
	case FrontendSpec:
		return compareSpec(ds, o, func(os FrontendSpec) bool { return os.LoadBalancer == ds.LoadBalancer })
	case ListenerSpec:
		return compareSpec(ds, o, func(os ListenerSpec) bool { return os.LoadBalancer == ds.LoadBalancer })
	case BindSpec:
		return compareSpec(ds, o, func(os BindSpec) bool { return os.Frontend == ds.Frontend && os.Address == ds.Address })
	case ServerSpec:
		if os, ok := o.Spec.(ServerSpec); ok && ds.Weight == 0 {
			os.Weight = 0 // defaulted by the provider
			o.Spec = os
		}
		return compareSpec(ds, o, func(os ServerSpec) bool { return os.Backend == ds.Backend && os.Address == ds.Address })
	case HealthCheckSpec:
		return compareSpec(ds, o, func(os HealthCheckSpec) bool { return os.Backend == ds.Backend })
	}
	return Replace
}

// compareSpec compares the desired spec ds with o's: Replace when o's
// spec is of another type or same (the fields that cannot change in
// place are equal) is false, else UpToDate or Updatable.
func compareSpec[S comparable](ds S, o Object, same func(S) bool) Verdict {
	os, ok := o.Spec.(S)
	switch {
	case !ok || !same(os):
		return Replace
	case os == ds:
		return UpToDate
	}
	return Updatable
}
