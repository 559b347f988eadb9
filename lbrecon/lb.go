package lbrecon

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
)

// Kinds of the load-balancer plan.
const (
	KindBackend  = "backend"
	KindFrontend = "frontend"
	KindBind     = "bind"
	KindServer   = "server"
)

// BackendSpec describes a backend: a pool of servers on a load balancer.
type BackendSpec struct {
	LoadBalancer string
}

// FrontendSpec describes a frontend on a load balancer forwarding to a backend.
type FrontendSpec struct {
	LoadBalancer   string
	DefaultBackend string // the backend's ID
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
// owner manages: per port a backend and a frontend, per frontend a bind per
// external address, per backend a server per target.
type LoadBalancer struct {
	// ID is the load balancer's identifier. Backends and frontends of other
	// load balancers are ignored.
	ID string
	// Suffix ends every object name ("<port>.<suffix>", "<address>.<port>.<suffix>",
	// "<target>.<port>.<suffix>"). Ownership is proven by the tag, not by
	// the name: an untagged object is adopted only when its kind, exact name
	// and spec (including its parent, which must be this plan's) are those
	// of an object about to be created.
	Suffix    string
	Ports     []Port
	Addresses []netip.Addr
	Targets   []Target
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
	return lb
}
