package kubefake_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/reconkit/reconkit/kubefake"
)

// The benchmarks are the requests a fleet of agents makes most, written
// with the public API alone, so that they run the same on an older
// revision of the package for a side-by-side figure (benchstat).

// benchLease is a Lease as the agents keep them: a holder, a duration, a
// renewal time, labels, and a record in an annotation.
func benchLease(name string) *coordinationv1.Lease {
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: map[string]string{"app": "agent", "node": name},
			Annotations: map[string]string{"example.com/record": `{"release":"v1.2.3","node":"` + name + `","features":["a","b","c"],"term":17,"since":"2026-01-01T00:00:00Z"}`}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(name), LeaseDurationSeconds: ptr.To[int32](40),
			AcquireTime: &metav1.MicroTime{Time: time.Unix(1e9, 0)}, RenewTime: &metav1.MicroTime{Time: time.Unix(1e9, 0)}},
	}
}

// watchAll opens n watches of the resource through their own clients and
// drains them until the benchmark ends.
func watchAll(b *testing.B, srv *kubefake.Server, n int, open func(*kubefake.Client) (<-chan struct{}, func())) {
	var wg sync.WaitGroup
	b.Cleanup(wg.Wait) // after the stops: cleanups run last first
	for range n {
		done, stop := open(srv.NewClient())
		wg.Go(func() { <-done })
		b.Cleanup(stop)
	}
}

func leaseWatchers(b *testing.B, srv *kubefake.Server, n int) {
	watchAll(b, srv, n, func(c *kubefake.Client) (<-chan struct{}, func()) {
		w, err := c.CoordinationV1().Leases("ns").Watch(context.Background(), metav1.ListOptions{})
		if err != nil {
			b.Fatal(err)
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			for range w.ResultChan() {
			}
		}()
		return done, w.Stop
	})
}

// BenchmarkLeaseRenew is a heartbeat: a Lease updated with a new renewal
// time, from the object the last update answered (managedFields and all),
// with 0 or 5 other clients watching Leases.
func BenchmarkLeaseRenew(b *testing.B) {
	for _, watchers := range []int{0, 5} {
		b.Run(fmt.Sprintf("watchers=%d", watchers), func(b *testing.B) {
			srv := kubefake.Config{}.NewServer()
			c := srv.NewClient()
			leases := c.CoordinationV1().Leases("ns")
			ctx := context.Background()
			l, err := leases.Create(ctx, benchLease("a"), metav1.CreateOptions{FieldManager: "agent"})
			if err != nil {
				b.Fatal(err)
			}
			leaseWatchers(b, srv, watchers)
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				l.Spec.RenewTime = &metav1.MicroTime{Time: time.Unix(1e9+int64(i), 0)}
				if l, err = leases.Update(ctx, l, metav1.UpdateOptions{FieldManager: "agent"}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// benchNode is a Node with the status a kubelet reports.
func benchNode(name string) *corev1.Node {
	t := metav1.NewTime(time.Unix(1e9, 0))
	var conds []corev1.NodeCondition
	for _, c := range []corev1.NodeConditionType{corev1.NodeReady, corev1.NodeMemoryPressure, corev1.NodeDiskPressure, corev1.NodePIDPressure, corev1.NodeNetworkUnavailable} {
		conds = append(conds, corev1.NodeCondition{Type: c, Status: corev1.ConditionFalse, LastHeartbeatTime: t, LastTransitionTime: t, Reason: "Fine", Message: "all is well"})
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name, "kubernetes.io/os": "linux"}},
		Spec:       corev1.NodeSpec{PodCIDR: "10.0.0.0/24", ProviderID: "fake://" + name},
		Status: corev1.NodeStatus{
			Capacity:        corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("16Gi")},
			Allocatable:     corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("15Gi")},
			Conditions:      conds,
			Addresses:       []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.1"}, {Type: corev1.NodeHostName, Address: name}},
			DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: 10250}},
			NodeInfo:        corev1.NodeSystemInfo{KubeletVersion: "v1.37.1", OSImage: "Linux", KernelVersion: "6.1", ContainerRuntimeVersion: "containerd://2.0", Architecture: "amd64", OperatingSystem: "linux"},
		},
	}
}

// BenchmarkNodeStatusPatch is a node's status heartbeat: a strategic
// merge patch of its conditions' heartbeat times on the status
// subresource, guarded by the resourceVersion it last saw.
func BenchmarkNodeStatusPatch(b *testing.B) {
	srv := kubefake.Config{}.NewServer()
	c := srv.NewClient()
	nodes := c.CoreV1().Nodes()
	ctx := context.Background()
	n, err := nodes.Create(ctx, benchNode("a"), metav1.CreateOptions{FieldManager: "agent"})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		ts := time.Unix(1e9+int64(i), 0).UTC().Format(time.RFC3339)
		var conds []string
		for _, c := range n.Status.Conditions {
			conds = append(conds, fmt.Sprintf(`{"type":%q,"lastHeartbeatTime":%q}`, c.Type, ts))
		}
		p := fmt.Sprintf(`{"metadata":{"resourceVersion":%q},"status":{"conditions":[%s]}}`, n.ResourceVersion, strings.Join(conds, ","))
		if n, err = nodes.Patch(ctx, "a", types.StrategicMergePatchType, []byte(p), metav1.PatchOptions{FieldManager: "agent"}, "status"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkListFieldSelector lists the pods of one node among 200, as an
// agent lists what runs on its node.
func BenchmarkListFieldSelector(b *testing.B) {
	srv := kubefake.Config{}.NewServer()
	c := srv.NewClient()
	ctx := context.Background()
	for i := range 200 {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprintf("p%d", i), Labels: map[string]string{"app": "x"}},
			Spec: corev1.PodSpec{NodeName: fmt.Sprintf("n%d", i%10), Containers: []corev1.Container{{Name: "c", Image: "i"}}}}
		if _, err := c.CoreV1().Pods("ns").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		l, err := c.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=n3"})
		if err != nil {
			b.Fatal(err)
		}
		if len(l.Items) != 20 {
			b.Fatalf("%d pods, want 20", len(l.Items))
		}
	}
}

// BenchmarkGet is a linearizable read of one Lease.
func BenchmarkGet(b *testing.B) {
	srv := kubefake.Config{}.NewServer(benchLease("a"))
	c := srv.NewClient()
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.CoordinationV1().Leases("ns").Get(ctx, "a", metav1.GetOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}
