package ccm

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/reconkit/reconkit/lbrecon"
	"github.com/reconkit/reconkit/lbrecon/nodetargets"
)

// ErrUnsupportedService is wrapped by the mapping helpers when a Service
// asks for something the load-balancer plan cannot express.
var ErrUnsupportedService = errors.New("ccm: service not supported")

// Mapping turns a Service and the nodes the service controller gives into
// the desired load balancer, and the load balancer into the Service's
// status. The host implements it; [Funcs] adapts two functions. Its
// methods are called concurrently, for different Services, from the
// service controller's workers, and must not block.
type Mapping interface {
	// LoadBalancer returns the desired load balancer of svc. nodes is the
	// service controller's node list as it passes it to EnsureLoadBalancer
	// and UpdateLoadBalancer (see the package documentation for what it
	// holds); it is nil when called from GetLoadBalancer and
	// EnsureLoadBalancerDeleted, where only the ID and Suffix are used.
	// The ID must not depend on nodes. svc and nodes are read-only.
	LoadBalancer(ctx context.Context, clusterName string, svc *v1.Service, nodes []*v1.Node) (lbrecon.LoadBalancer, error)
	// Status returns the status of svc's load balancer lb, given the
	// external ports bound on each external address.
	Status(ctx context.Context, svc *v1.Service, lb lbrecon.LoadBalancer, bound map[netip.Addr][]uint16) (*v1.LoadBalancerStatus, error)
}

// Funcs is a [Mapping] made of two functions. A nil StatusFunc means
// [IngressStatus].
type Funcs struct {
	LoadBalancerFunc func(ctx context.Context, clusterName string, svc *v1.Service, nodes []*v1.Node) (lbrecon.LoadBalancer, error)
	StatusFunc       func(ctx context.Context, svc *v1.Service, lb lbrecon.LoadBalancer, bound map[netip.Addr][]uint16) (*v1.LoadBalancerStatus, error)
}

var _ Mapping = Funcs{}

// LoadBalancer implements [Mapping].
func (f Funcs) LoadBalancer(ctx context.Context, clusterName string, svc *v1.Service, nodes []*v1.Node) (lbrecon.LoadBalancer, error) {
	if f.LoadBalancerFunc == nil {
		return lbrecon.LoadBalancer{}, fmt.Errorf("%w: Funcs.LoadBalancerFunc is nil", lbrecon.ErrInvalidConfig)
	}
	return f.LoadBalancerFunc(ctx, clusterName, svc, nodes)
}

// Status implements [Mapping].
func (f Funcs) Status(ctx context.Context, svc *v1.Service, lb lbrecon.LoadBalancer, bound map[netip.Addr][]uint16) (*v1.LoadBalancerStatus, error) {
	if f.StatusFunc == nil {
		return IngressStatus(ctx, svc, lb, bound)
	}
	return f.StatusFunc(ctx, svc, lb, bound)
}

// IngressStatus is the default status: one ingress IP per external
// address of lb on which every port of lb is bound, in lb's order.
func IngressStatus(_ context.Context, _ *v1.Service, lb lbrecon.LoadBalancer, bound map[netip.Addr][]uint16) (*v1.LoadBalancerStatus, error) {
	st := &v1.LoadBalancerStatus{}
	for _, a := range lb.Addresses {
		all := true
		for _, p := range lb.Ports {
			if !slices.Contains(bound[a], p.ExternalPort) {
				all = false
			}
		}
		if all {
			st.Ingress = append(st.Ingress, v1.LoadBalancerIngress{IP: a.String()})
		}
	}
	return st, nil
}

// ServicePorts returns the ports of svc as the load-balancer plan's ports:
// named after the Service port (or "<protocol>-<port>" when it has no
// name), forwarding the port to its node port. The plan has no protocol
// and forwards to node ports, so it refuses, with an
// [ErrUnsupportedService] error naming the field: a port without a node
// port (spec.allocateLoadBalancerNodePorts false), and two ports on one
// port number (TCP and UDP: a mixed-protocol Service). The Balancer
// returns that error from EnsureLoadBalancer as it is, never as a
// RetryError; deleting such a Service needs no mapping.
func ServicePorts(svc *v1.Service) ([]lbrecon.Port, error) {
	var out []lbrecon.Port
	for i, p := range svc.Spec.Ports {
		name := p.Name
		if name == "" {
			name = strings.ToLower(string(p.Protocol)) + "-" + strconv.Itoa(int(p.Port))
		}
		if p.NodePort <= 0 || p.NodePort > 65535 {
			why := "the load balancer forwards to node ports"
			if a := svc.Spec.AllocateLoadBalancerNodePorts; a != nil && !*a {
				why = "spec.allocateLoadBalancerNodePorts is false, and the load balancer forwards to node ports: set it true"
			}
			return nil, fmt.Errorf("%w: service %s/%s: spec.ports[%d].nodePort (port %q) is %d: %s",
				ErrUnsupportedService, svc.Namespace, svc.Name, i, name, p.NodePort, why)
		}
		if p.Port <= 0 || p.Port > 65535 {
			return nil, fmt.Errorf("%w: service %s/%s: spec.ports[%d].port (port %q) is %d",
				ErrUnsupportedService, svc.Namespace, svc.Name, i, name, p.Port)
		}
		for j, q := range out {
			if q.ExternalPort == uint16(p.Port) {
				return nil, fmt.Errorf("%w: service %s/%s: spec.ports[%d] (%s %d) and spec.ports[%d] (%s %d) share a port number, which the load balancer cannot tell apart (mixed protocols): use one protocol per port number",
					ErrUnsupportedService, svc.Namespace, svc.Name, j, svc.Spec.Ports[j].Protocol, q.ExternalPort, i, p.Protocol, p.Port)
			}
		}
		out = append(out, lbrecon.Port{Name: name, NodePort: uint16(p.NodePort), ExternalPort: uint16(p.Port)})
	}
	return out, nil
}

// NodeTargets returns nodetargets.From of the nodes the service controller
// gives (one target per node at its first InternalIP, sorted by name, a
// node without one or a second of one name left out). Every node given is
// used, whatever the Service's externalTrafficPolicy: the service
// controller already left out the nodes it excludes (see the package
// documentation).
func NodeTargets(nodes []*v1.Node) []lbrecon.Target {
	vals := make([]v1.Node, 0, len(nodes))
	for _, n := range nodes {
		if n != nil {
			vals = append(vals, *n)
		}
	}
	return nodetargets.From(vals, v1.NodeInternalIP)
}

// ServiceHealthCheck returns the health check svc asks for: with
// externalTrafficPolicy Local, an HTTP check of its healthCheckNodePort
// at /healthz (kube-proxy answers 200 there only on nodes with a local
// endpoint); nil with Cluster, or while the apiserver has allocated no
// port. A Mapping sets it as [lbrecon.LoadBalancer.HealthCheck]: switching
// the policy then changes the health checks alone.
func ServiceHealthCheck(svc *v1.Service) *lbrecon.HealthCheck {
	p := svc.Spec.HealthCheckNodePort
	if svc.Spec.ExternalTrafficPolicy != v1.ServiceExternalTrafficPolicyLocal || p <= 0 || p > 65535 {
		return nil
	}
	return &lbrecon.HealthCheck{Port: uint16(p), Path: "/healthz"}
}
