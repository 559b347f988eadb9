package nodestatus

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
)

// write applies what the controller would write for want to server, the
// way the API server applies a strategic merge patch, and returns the
// result and the patch (nil if none).
func write(t *testing.T, want, server *corev1.Node) (*corev1.Node, []byte) {
	t.Helper()
	meta, err := nodePatchMeta()
	require.NoError(t, err)
	rec, err := serverRecord(server)
	require.NoError(t, err)
	d := want.DeepCopy()
	stampTimes(d, server, time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC), false)
	p, err := statusPatch(meta, d, server, rec)
	require.NoError(t, err)
	if p == nil {
		return server, nil
	}
	cur, err := json.Marshal(server)
	require.NoError(t, err)
	out, err := strategicpatch.StrategicMergePatch(cur, p, &corev1.Node{})
	require.NoError(t, err)
	var n corev1.Node
	require.NoError(t, json.Unmarshal(out, &n))
	return &n, p
}

func addrs(list ...string) []corev1.NodeAddress {
	var out []corev1.NodeAddress
	for _, a := range list {
		typ := corev1.NodeInternalIP
		if a == "host" {
			typ = corev1.NodeHostName
		}
		out = append(out, corev1.NodeAddress{Type: typ, Address: a})
	}
	return out
}

func withAddrs(list ...string) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "n"},
		Status: corev1.NodeStatus{
			Addresses:  addrs(list...),
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "R"}},
		},
	}
}

func TestStatusPatchReplacesAddresses(t *testing.T) {
	server := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", ResourceVersion: "1"}}
	for _, step := range [][]string{
		{"10.0.0.1", "fd00::1"},
		{"10.0.0.2", "fd00::2"}, // both families change
		{"10.0.0.1"},            // dual-stack to single
		{"10.0.0.3", "fd00::3"}, // single to dual-stack
		{"fd00::3", "10.0.0.3"}, // order matters: the first of a family is primary
		{"host", "10.0.0.3"},
		{}, // what we wrote is withdrawn
	} {
		var p []byte
		server, p = write(t, withAddrs(step...), server)
		require.NotNil(t, p, "addresses %v need a write", step)
		if len(step) == 0 {
			require.Empty(t, server.Status.Addresses, "after withdrawing them")
		} else {
			require.Equal(t, addrs(step...), server.Status.Addresses, "after writing %v", step)
		}
		again, p := write(t, withAddrs(step...), server)
		require.Nil(t, p, "addresses %v are written once, not at every write: %s", step, p)
		require.Equal(t, server, again)
	}
}

func TestStatusPatchLeavesOthersAddresses(t *testing.T) {
	server := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}}
	server.Status.Addresses = addrs("192.168.0.1")
	got, _ := write(t, withAddrs(), server)
	require.Equal(t, addrs("192.168.0.1"), got.Status.Addresses, "a provider that never reported addresses leaves them alone")
}

func TestStatusPatchNothingForUnchangedStatus(t *testing.T) {
	want := withAddrs("10.0.0.1")
	server, p := write(t, want, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}})
	require.NotNil(t, p)
	// Others add a condition in front of ours, and fill nodeInfo and
	// daemonEndpoints, which the provider leaves empty.
	server.Status.Conditions = append([]corev1.NodeCondition{{Type: "Theirs", Status: corev1.ConditionTrue}}, server.Status.Conditions...)
	server.Status.NodeInfo.KubeletVersion = "v1.37.1"
	server.Status.DaemonEndpoints.KubeletEndpoint.Port = 10250
	got, p := write(t, want, server)
	require.Nil(t, p, "neither element order nor zero nodeInfo is a change: %s", p)
	require.Equal(t, server, got)

	// A real change keeps what others wrote.
	want.Status.Conditions[0].Reason = "Other"
	got, p = write(t, want, server)
	require.NotNil(t, p)
	require.NotContains(t, string(p), "$setElementOrder")
	require.Equal(t, "v1.37.1", got.Status.NodeInfo.KubeletVersion)
	require.EqualValues(t, 10250, got.Status.DaemonEndpoints.KubeletEndpoint.Port)
	require.Len(t, got.Status.Conditions, 2)
	require.Equal(t, "Theirs", string(got.Status.Conditions[0].Type))
}

func TestStatusPatchNodeInfoOwnedWhenSet(t *testing.T) {
	want := withAddrs()
	want.Status.NodeInfo.KubeletVersion = "v1.37.1-vk"
	server, _ := write(t, want, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}})
	require.Equal(t, "v1.37.1-vk", server.Status.NodeInfo.KubeletVersion)
	want.Status.NodeInfo.KubeletVersion = ""
	server, p := write(t, want, server)
	require.NotNil(t, p)
	require.Empty(t, server.Status.NodeInfo.KubeletVersion, "what we set and withdraw is cleared")
}

// A patch whose every change is one of form only (a quantity written
// another way by someone else) changes nothing once applied: it is not
// sent. Without that check, the three-way patch, which compares text,
// would rewrite the quantity.
func TestStatusPatchNothingForEquivalentQuantity(t *testing.T) {
	want := withAddrs("10.0.0.1")
	want.Status.Capacity = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("100Gi")}
	server, p := write(t, want, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}})
	require.NotNil(t, p)
	// Someone writes the same amount in decimal form.
	server.Status.Capacity[corev1.ResourceMemory] = *resource.NewQuantity(100<<30, resource.DecimalSI)
	b, err := json.Marshal(server.Status.Capacity)
	require.NoError(t, err)
	require.Contains(t, string(b), `"107374182400"`, "the served text differs from ours")
	_, p = write(t, want, server)
	require.Nil(t, p, "the same quantity in another form is no change: %s", p)
}
