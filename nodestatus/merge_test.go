package nodestatus

import (
	"reflect"
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

// fill sets every leaf of v (strings, bools, numbers, through pointers and
// structs): strings to a value derived from tag, bools and numbers to true
// and 1, or with zero to an explicit false and 0, so that two fills with
// different tags and zero differ in every field.
func fill(t *testing.T, v reflect.Value, tag string, zero bool) {
	t.Helper()
	switch v.Kind() {
	case reflect.String:
		v.SetString(tag)
	case reflect.Bool:
		v.SetBool(!zero)
	case reflect.Int, reflect.Int32, reflect.Int64:
		if !zero {
			v.SetInt(1)
		}
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(t, v.Elem(), tag, zero)
	case reflect.Struct:
		for i := range v.NumField() {
			fill(t, v.Field(i), tag+"."+v.Type().Field(i).Name, zero)
		}
	default:
		t.Fatalf("fill: %s has kind %s: teach the overlay test about it", v.Type(), v.Kind())
	}
}

// The nodeInfo rule, field by field: each field the provider sets is the
// provider's, each it leaves empty is Config.Node's, and the deprecated
// kubeProxyVersion is always Config.Node's. Every field of
// NodeSystemInfo is checked, so one the overlay forgets (a field a new
// API version adds included) fails here.
func TestOverlayNodeInfoFieldByField(t *testing.T) {
	var baseInfo, provInfo corev1.NodeSystemInfo
	fill(t, reflect.ValueOf(&baseInfo).Elem(), "base", false)
	// The provider's bools and numbers are an explicit false and 0: a
	// reported value, which wins.
	fill(t, reflect.ValueOf(&provInfo).Elem(), "provider", true)
	base := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}}
	base.Status.NodeInfo = baseInfo
	base.Status.DaemonEndpoints.KubeletEndpoint.Port = 10250

	typ := reflect.TypeFor[corev1.NodeSystemInfo]()
	for i := range typ.NumField() {
		f := typ.Field(i)
		t.Run(f.Name, func(t *testing.T) {
			n := &corev1.Node{}
			reflect.ValueOf(&n.Status.NodeInfo).Elem().Field(i).Set(reflect.ValueOf(provInfo).Field(i))
			want := baseInfo.DeepCopy()
			if f.Name != "KubeProxyVersion" {
				reflect.ValueOf(want).Elem().Field(i).Set(reflect.ValueOf(provInfo).Field(i))
			}
			got := overlay(base, n)
			require.Equal(t, *want, got.Status.NodeInfo, "the provider set only %s", f.Name)
			require.EqualValues(t, 10250, got.Status.DaemonEndpoints.KubeletEndpoint.Port, "a port the provider leaves unset is Config.Node's")
		})
	}

	// Everything set by the provider: all of it is the provider's but
	// kubeProxyVersion; and its daemon port wins.
	n := &corev1.Node{}
	n.Status.NodeInfo = provInfo
	n.Status.DaemonEndpoints.KubeletEndpoint.Port = 10251
	want := provInfo.DeepCopy()
	// The deprecated kubeProxyVersion, by name (its field is deprecated).
	reflect.ValueOf(want).Elem().FieldByName("KubeProxyVersion").Set(reflect.ValueOf(baseInfo).FieldByName("KubeProxyVersion"))
	got := overlay(base, n)
	require.Equal(t, *want, got.Status.NodeInfo)
	require.EqualValues(t, 10251, got.Status.DaemonEndpoints.KubeletEndpoint.Port)
}
