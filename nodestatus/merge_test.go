package nodestatus

import (
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestOverlayKeepsConfigNode(t *testing.T) {
	base := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{"reg": "1", "both": "base"}, Annotations: map[string]string{"a": "1"}},
		Spec: corev1.NodeSpec{ProviderID: "cloud://n", Taints: []corev1.Taint{
			{Key: "reg", Effect: corev1.TaintEffectNoSchedule},
			{Key: "both", Value: "base", Effect: corev1.TaintEffectNoExecute},
		}},
		Status: corev1.NodeStatus{
			Conditions: []corev1.NodeCondition{{Type: "Base", Status: corev1.ConditionTrue}, {Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
			Addresses:  []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.1"}, {Type: corev1.NodeHostName, Address: "n"}},
			Capacity:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourcePods: resource.MustParse("110")},
			NodeInfo:   corev1.NodeSystemInfo{OperatingSystem: "linux", KubeletVersion: "base"},
		},
	}
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"both": "provider", "p": "1"}},
		Spec:       corev1.NodeSpec{Taints: []corev1.Taint{{Key: "both", Value: "provider", Effect: corev1.TaintEffectNoExecute}}},
		Status: corev1.NodeStatus{
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionFalse}},
			Addresses:  []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.2"}, {Type: corev1.NodeInternalIP, Address: "fd00::2"}},
			Capacity:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")},
			NodeInfo:   corev1.NodeSystemInfo{KubeletVersion: "provider"},
		},
	}
	baseCopy, nCopy := base.DeepCopy(), n.DeepCopy()
	got := overlay(base, n)
	require.Equal(t, baseCopy, base, "base untouched")
	require.Equal(t, nCopy, n, "notified node untouched")

	require.Equal(t, map[string]string{"reg": "1", "both": "provider", "p": "1"}, got.Labels)
	require.Equal(t, map[string]string{"a": "1"}, got.Annotations)
	require.ElementsMatch(t, []corev1.Taint{
		{Key: "reg", Effect: corev1.TaintEffectNoSchedule},
		{Key: "both", Value: "provider", Effect: corev1.TaintEffectNoExecute},
	}, got.Spec.Taints)
	require.Equal(t, "cloud://n", got.Spec.ProviderID)
	require.ElementsMatch(t, []corev1.NodeCondition{{Type: "Base", Status: corev1.ConditionTrue}, {Type: corev1.NodeReady, Status: corev1.ConditionFalse}}, got.Status.Conditions)
	require.Equal(t, []corev1.NodeAddress{
		{Type: corev1.NodeInternalIP, Address: "10.0.0.2"}, {Type: corev1.NodeInternalIP, Address: "fd00::2"},
		{Type: corev1.NodeHostName, Address: "n"},
	}, got.Status.Addresses, "the provider's InternalIPs replace base's; base's HostName stays")
	require.Equal(t, "4", got.Status.Capacity.Cpu().String())
	require.Equal(t, "110", got.Status.Capacity.Pods().String())
	require.Equal(t, corev1.NodeSystemInfo{OperatingSystem: "linux", KubeletVersion: "provider"}, got.Status.NodeInfo)

	// An empty notification changes nothing.
	require.Equal(t, base, overlay(base, &corev1.Node{}))
}

// runningInUserNamespace is overlaid like the other nodeInfo fields, and an
// explicit false or a swap capacity of 0 is a reported value that the
// merge view keeps, while unset fields drop out.
func TestNodeInfoPointerFields(t *testing.T) {
	f, zero := false, int64(0)
	base := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}}
	n := &corev1.Node{Status: corev1.NodeStatus{NodeInfo: corev1.NodeSystemInfo{
		RunningInUserNamespace: &f, Swap: &corev1.NodeSwapStatus{Capacity: &zero},
	}}}
	got := overlay(base, n)
	require.NotNil(t, got.Status.NodeInfo.RunningInUserNamespace, "overlay dropped runningInUserNamespace")
	require.False(t, *got.Status.NodeInfo.RunningInUserNamespace)

	view, err := mergeView(got)
	require.NoError(t, err)
	require.Contains(t, string(view), `"runningInUserNamespace":false`)
	require.Contains(t, string(view), `"swap":{"capacity":0}`)
	require.NotContains(t, string(view), `"machineID"`, "unset strings drop out")
	require.NotContains(t, string(view), `"daemonEndpoints"`, "a Port of 0 is unset")
}
