package lbrecon

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
)

// HealthCheck asks for an HTTP health check of every backend, as
// Kubernetes' externalTrafficPolicy: Local wants (the Service's
// healthCheckNodePort, path /healthz).
type HealthCheck struct {
	Port uint16
	Path string
}

// Listening says how the plan's load balancer listens on its ports.
type Listening int

const (
	// ListenBinds (the zero value) is the HAProxy shape: per port a
	// frontend, and per frontend a bind ([KindBind]) per external
	// address.
	ListenBinds Listening = iota
	// ListenPorts is the ELB and Octavia shape: per port a listener
	// ([KindListener]) on the load balancer, which listens on the
	// addresses the load balancer has; there are no binds.
	ListenPorts
)

// Port is one forwarded port: traffic to ExternalPort on every external
// address goes to NodePort on every target.
type Port struct {
	Name         string
	NodePort     uint16
	ExternalPort uint16
}

// Target is a server traffic is forwarded to.
type Target struct {
	Name    string
	Address netip.Addr
}

// LoadBalancer is the desired state of one load balancer's share that one
// owner manages: with Provision, first the load-balancer object itself;
// per port a backend and a frontend (a listener with [ListenPorts]), per
// frontend a bind per external address, per backend a server per target
// and, with HealthCheck, a health check.
type LoadBalancer struct {
	// ID is the load balancer's identifier: the provider's, of a load
	// balancer that exists, or with Provision the name the plan gives
	// the one it creates. It is the scope of the reconciler's listings.
	// Backends, frontends and listeners of other load balancers are
	// ignored.
	ID string
	// Provision makes the plan begin with the provider's load-balancer
	// object ([KindLoadBalancer], spec [LoadBalancerSpec]{Name: ID}),
	// created, journaled and confirmed like every other object. The
	// provider assigns its identifier, which the backends, frontends and
	// listeners then carry (they are created once it is ok), and its
	// address or DNS name ([LoadBalancerStatus], in [Object.Status]),
	// which the plan waits for: binds ([ListenBinds]) are made on that
	// address too, and the plan converges only once it is known. It
	// cannot change for a reconciler's lifetime.
	Provision bool
	// Listening chooses binds per address (the zero value) or listeners
	// per port.
	Listening Listening
	// HealthCheck, when set, gives every backend a health check; setting
	// or clearing it changes nothing else.
	HealthCheck *HealthCheck
	// Suffix ends every object name ("<port>.<suffix>", "<address>.<port>.<suffix>",
	// "<target>.<port>.<suffix>"). Ownership is proven by the tag, not by
	// the name: an untagged object is adopted only when its kind, exact name
	// and spec (including its parent, which must be this plan's) are those
	// of an object about to be created. The load-balancer object is named
	// "lb.<suffix>", a health check as its backend.
	Suffix string
	Ports  []Port
	// Addresses are the external addresses binds are made on; with
	// Provision the address the provider assigns is added once known.
	Addresses []netip.Addr
	Targets   []Target

	teardown bool // the plan of a teardown: nothing desired, the load balancer included
}

// Validate reports a clear error for an unusable description.
func (lb LoadBalancer) Validate() error {
	var errs []error
	if lb.ID == "" {
		errs = append(errs, errors.New("ID is empty"))
	}
	if lb.Suffix == "" || strings.ContainsAny(lb.Suffix, " \t\n") {
		errs = append(errs, fmt.Errorf("suffix %q must be non-empty without spaces", lb.Suffix))
	}
	names, ext := map[string]bool{}, map[uint16]bool{}
	for _, p := range lb.Ports {
		if p.Name == "" || strings.ContainsAny(p.Name, ". \t\n") {
			errs = append(errs, fmt.Errorf("port name %q must be non-empty without dots or spaces", p.Name))
		}
		if names[p.Name] {
			errs = append(errs, fmt.Errorf("port name %q repeated", p.Name))
		}
		if ext[p.ExternalPort] {
			errs = append(errs, fmt.Errorf("external port %d repeated", p.ExternalPort))
		}
		if p.NodePort == 0 || p.ExternalPort == 0 {
			errs = append(errs, fmt.Errorf("port %q: node and external port must be non-zero", p.Name))
		}
		names[p.Name], ext[p.ExternalPort] = true, true
	}
	addrs := map[netip.Addr]bool{}
	for _, a := range lb.Addresses {
		if !a.IsValid() {
			errs = append(errs, errors.New("invalid external address"))
		}
		if addrs[a] {
			errs = append(errs, fmt.Errorf("external address %v repeated", a))
		}
		addrs[a] = true
	}
	if hc := lb.HealthCheck; hc != nil && (hc.Port == 0 || !strings.HasPrefix(hc.Path, "/")) {
		errs = append(errs, fmt.Errorf("health check needs a non-zero port and a path starting with /, not %d %q", hc.Port, hc.Path))
	}
	if lb.Listening != ListenBinds && lb.Listening != ListenPorts {
		errs = append(errs, fmt.Errorf("unknown listening %d", lb.Listening))
	}
	targets := map[string]bool{}
	for _, t := range lb.Targets {
		if t.Name == "" || strings.ContainsAny(t.Name, " \t\n") || !t.Address.IsValid() {
			errs = append(errs, fmt.Errorf("target %q needs a name without spaces and a valid address", t.Name))
		}
		if targets[t.Name] {
			errs = append(errs, fmt.Errorf("target name %q repeated", t.Name))
		}
		targets[t.Name] = true
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: load balancer: %w", ErrInvalidConfig, errors.Join(errs...))
	}
	return nil
}

func (lb LoadBalancer) name(parts ...string) string {
	return strings.Join(append(parts, lb.Suffix), ".")
}

func (lb LoadBalancer) clone() LoadBalancer {
	lb.Ports = slices.Clone(lb.Ports)
	lb.Addresses = slices.Clone(lb.Addresses)
	lb.Targets = slices.Clone(lb.Targets)
	if lb.HealthCheck != nil {
		hc := *lb.HealthCheck
		lb.HealthCheck = &hc
	}
	return lb
}
