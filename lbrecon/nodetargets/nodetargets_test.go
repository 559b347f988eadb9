package nodetargets_test

import (
	"fmt"
	"net/netip"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/reconkit/reconkit/lbrecon"
	"github.com/reconkit/reconkit/lbrecon/nodetargets"
)

func node(name string, addrs ...corev1.NodeAddress) corev1.Node {
	return corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.NodeStatus{Addresses: addrs}}
}

func addr(t corev1.NodeAddressType, a string) corev1.NodeAddress {
	return corev1.NodeAddress{Type: t, Address: a}
}

func TestFrom(t *testing.T) {
	ip := netip.MustParseAddr
	for _, tc := range []struct {
		name  string
		nodes []corev1.Node
		types []corev1.NodeAddressType
		want  []lbrecon.Target
	}{
		{"internal IP by default, sorted", []corev1.Node{
			node("b", addr(corev1.NodeExternalIP, "203.0.113.2"), addr(corev1.NodeInternalIP, "10.0.0.2")),
			node("a", addr(corev1.NodeInternalIP, "10.0.0.1")),
		}, nil, []lbrecon.Target{{Name: "a", Address: ip("10.0.0.1")}, {Name: "b", Address: ip("10.0.0.2")}}},
		{"no address of the type: left out", []corev1.Node{
			node("a", addr(corev1.NodeHostName, "a.local")), node("b", addr(corev1.NodeInternalIP, "10.0.0.2")),
		}, nil, []lbrecon.Target{{Name: "b", Address: ip("10.0.0.2")}}},
		{"unparsable address skipped for the next", []corev1.Node{
			node("a", addr(corev1.NodeInternalIP, "nonsense"), addr(corev1.NodeInternalIP, "fd00::1")),
		}, nil, []lbrecon.Target{{Name: "a", Address: ip("fd00::1")}}},
		{"types in order of preference", []corev1.Node{
			node("a", addr(corev1.NodeInternalIP, "10.0.0.1"), addr(corev1.NodeExternalIP, "203.0.113.1")),
			node("b", addr(corev1.NodeInternalIP, "10.0.0.2")),
		}, []corev1.NodeAddressType{corev1.NodeExternalIP, corev1.NodeInternalIP},
			[]lbrecon.Target{{Name: "a", Address: ip("203.0.113.1")}, {Name: "b", Address: ip("10.0.0.2")}}},
		{"IPv4-mapped IPv6 unmapped", []corev1.Node{node("a", addr(corev1.NodeInternalIP, "::ffff:10.0.0.1"))},
			nil, []lbrecon.Target{{Name: "a", Address: ip("10.0.0.1")}}},
		{"duplicate names once", []corev1.Node{
			node("a", addr(corev1.NodeInternalIP, "10.0.0.1")), node("a", addr(corev1.NodeInternalIP, "10.0.0.9")),
		}, nil, []lbrecon.Target{{Name: "a", Address: ip("10.0.0.1")}}},
		{"none", nil, nil, []lbrecon.Target{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, nodetargets.From(tc.nodes, tc.types...))
		})
	}
}

// TestLBReconCompilesNoKubernetes: the conversion lives here so that
// lbrecon itself compiles no Kubernetes API types.
func TestLBReconCompilesNoKubernetes(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list; skipped under -short")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go command to list dependencies with")
	}
	out, err := exec.Command(goTool, "list", "-deps", "github.com/reconkit/reconkit/lbrecon").CombinedOutput()
	require.NoError(t, err, "%s", out)
	for _, dep := range strings.Fields(string(out)) {
		for _, f := range []string{"k8s.io/api/", "k8s.io/apimachinery/", "k8s.io/client-go/", "github.com/reconkit/reconkit/nodestatus"} {
			if strings.HasPrefix(dep, f) || dep == strings.TrimSuffix(f, "/") {
				t.Errorf("lbrecon depends on %s", dep)
			}
		}
	}
}

// A host turns the Nodes nodestatus.NodeHealth keeps into targets.
func ExampleFrom() {
	nodes := []corev1.Node{
		node("node-2", addr(corev1.NodeInternalIP, "10.0.0.2")),
		node("node-1", addr(corev1.NodeHostName, "node-1"), addr(corev1.NodeInternalIP, "10.0.0.1")),
		node("node-3", addr(corev1.NodeHostName, "node-3")),
	}
	for _, t := range nodetargets.From(nodes, corev1.NodeInternalIP) {
		fmt.Println(t.Name, t.Address)
	}
	// Output:
	// node-1 10.0.0.1
	// node-2 10.0.0.2
}
