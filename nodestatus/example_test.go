package nodestatus_test

import (
	"context"
	"fmt"
	"sync"
	"time"

	"golang.org/x/sync/semaphore"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/reconkit/reconkit/kubefake"
	"github.com/reconkit/reconkit/nodestatus"
	"github.com/reconkit/reconkit/nodestatus/nodestatustest"
)

// A node agent registers its node and keeps it alive; its provider reports
// status changes through the callback it was given.
func Example() {
	client := fake.NewClientset() // in a real agent: kubernetes.NewForConfig(cfg)
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "edge-1", Labels: map[string]string{"type": "virtual"}},
	}
	provider := nodestatustest.NewProvider(node)
	nc, err := nodestatus.New(nodestatus.Config{
		Client:     client,
		Node:       node,
		Provider:   provider,
		OnShutdown: nodestatus.ShutdownCordon,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { _ = nc.Run(ctx) }()
	select {
	case <-nc.Ready():
	case <-time.After(5 * time.Minute):
		fmt.Println("not ready within five minutes")
		cancel()
		return
	}

	got, _ := client.CoreV1().Nodes().Get(ctx, "edge-1", metav1.GetOptions{})
	for _, c := range got.Status.Conditions {
		fmt.Println(c.Type, c.Status, c.Reason)
	}
	lease, _ := client.CoordinationV1().Leases("kube-node-lease").Get(ctx, "edge-1", metav1.GetOptions{})
	fmt.Println("lease held by", *lease.Spec.HolderIdentity, "for", *lease.Spec.LeaseDurationSeconds, "seconds")

	cancel()
	select {
	case <-nc.Done():
	case <-time.After(5 * time.Minute):
		fmt.Println("Run did not return within five minutes")
		return
	}
	got, _ = client.CoreV1().Nodes().Get(context.Background(), "edge-1", metav1.GetOptions{})
	fmt.Println("unschedulable after shutdown:", got.Spec.Unschedulable, nc.Err())
	// Output:
	// MemoryPressure False NodeProviderDoesNotReport
	// DiskPressure False NodeProviderDoesNotReport
	// PIDPressure False NodeProviderDoesNotReport
	// Ready True NodeProviderReady
	// lease held by edge-1 for 40 seconds
	// unschedulable after shutdown: true <nil>
}

// A process that runs many nodes on one client shares one Limiter among
// their controllers: they register in a steady stream, no more than 8 at
// once, instead of all together.
func ExampleLimiter() {
	client := kubefake.NewClientset() // in a real agent: kubernetes.NewForConfig(cfg)
	limiter := semaphore.NewWeighted(8)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var ctrls []*nodestatus.NodeController
	for i := range 40 {
		nc, err := nodestatus.New(nodestatus.Config{
			Client:  client,
			Node:    &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("virtual-%03d", i)}},
			Limiter: limiter,
		})
		if err != nil {
			fmt.Println(err)
			cancel()
			return
		}
		ctrls = append(ctrls, nc)
		wg.Go(func() { _ = nc.Run(ctx) })
	}
	deadline := time.After(5 * time.Minute)
	for _, nc := range ctrls {
		select {
		case <-nc.Ready():
		case <-deadline:
			fmt.Println("not every node ready within five minutes")
			cancel()
			wg.Wait()
			return
		}
	}
	nodes, _ := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	fmt.Println(len(nodes.Items), "nodes registered")
	cancel()
	wg.Wait()
	fmt.Println("every unit returned:", limiter.TryAcquire(8))
	// Output:
	// 40 nodes registered
	// every unit returned: true
}
