package reconkit_test

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/reconkit/reconkit/kubefake"
	"github.com/reconkit/reconkit/nodestatus"
	"github.com/reconkit/reconkit/versiongate/kubestore"
)

// A node agent that keeps its Node alive with nodestatus keeps its version
// gate record on the same Lease: the store takes the controller's
// LeaseRenewal as the record's heartbeat, with no adapter, and the record
// costs no request of its own while the controller renews the Lease.
func Example_nodeLeaseRecords() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	client := kubefake.NewClientset() // in a real agent: kubernetes.NewForConfig(cfg)
	nc, err := nodestatus.New(nodestatus.Config{
		Client: client,
		Node:   &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "edge-1"}},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	done := make(chan error, 1)
	go func() { done <- nc.Run(ctx) }()
	<-nc.Ready()

	store, err := kubestore.New(kubestore.Config{
		Client:    client,
		Namespace: "agents", // the status Lease
		Gate:      "reconciler",
		NodeLease: &kubestore.NodeLeaseConfig{Heartbeat: nc.LeaseRenewal},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	// The gate (versiongate.Config{Store: store, NodeID: "edge-1",
	// RejoinAfterRecordLoss: true, ...}) publishes the record; here the
	// store is called directly to show where it lands.
	rec, err := store.PublishRecord(ctx, "edge-1", []byte("release 1.4"), 0)
	if err != nil {
		fmt.Println(err)
		return
	}
	lease, _ := client.CoordinationV1().Leases("kube-node-lease").Get(ctx, "edge-1", metav1.GetOptions{})
	// The record is a Lease of the store's, written once; the node Lease
	// keeps it alive, and the TTL counts from the heartbeat's last send.
	fmt.Println("record kept alive by Lease", lease.Namespace+"/"+lease.Name, "held by", *lease.Spec.HolderIdentity, "for", *lease.Spec.LeaseDurationSeconds, "s")
	fmt.Println("TTL left within the node Lease's:", rec.TTL > 0 && rec.TTL <= time.Duration(*lease.Spec.LeaseDurationSeconds)*time.Second)
	records, _, _ := store.ListRecords(ctx)
	for _, r := range records {
		fmt.Printf("%s: %s\n", r.ID, r.Value)
	}
	_, err = store.KeepAlive(ctx, rec) // no request: the controller's renewals count
	fmt.Println("kept alive:", err == nil)

	cancel()
	fmt.Println("nodestatus stopped:", <-done)
	// Output:
	// record kept alive by Lease kube-node-lease/edge-1 held by edge-1 for 40 s
	// TTL left within the node Lease's: true
	// edge-1: release 1.4
	// kept alive: true
	// nodestatus stopped: <nil>
}
