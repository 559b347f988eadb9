package nodetargets

import (
	"cmp"
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/reconkit/reconkit/lbrecon"
)

// From returns one target per Node of nodes, named after the Node, at its
// first address of the first of types that has one that parses as an IP
// address (types nil or empty means InternalIP alone), sorted by name. A
// Node with no such address is left out, as is a second Node of the same
// name.
func From(nodes []corev1.Node, types ...corev1.NodeAddressType) []lbrecon.Target {
	if len(types) == 0 {
		types = []corev1.NodeAddressType{corev1.NodeInternalIP}
	}
	out := make([]lbrecon.Target, 0, len(nodes))
	for i := range nodes {
		n := &nodes[i]
		if addr, ok := address(n, types); ok {
			out = append(out, lbrecon.Target{Name: n.Name, Address: addr})
		}
	}
	slices.SortStableFunc(out, func(a, b lbrecon.Target) int { return cmp.Compare(a.Name, b.Name) })
	return slices.CompactFunc(out, func(a, b lbrecon.Target) bool { return a.Name == b.Name })
}

func address(n *corev1.Node, types []corev1.NodeAddressType) (netip.Addr, bool) {
	for _, t := range types {
		for _, a := range n.Status.Addresses {
			if a.Type != t {
				continue
			}
			if addr, err := netip.ParseAddr(a.Address); err == nil {
				return addr.Unmap(), true
			}
		}
	}
	return netip.Addr{}, false
}
