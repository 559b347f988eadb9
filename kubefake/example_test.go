package kubefake_test

import (
	"context"
	"fmt"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/utils/ptr"

	"github.com/reconkit/reconkit/kubefake"
)

// Two candidates read the same Lease, and both try to take it. On the
// apiserver, and on this fake, the second write is refused.
func Example() {
	ctx := context.Background()
	cs := kubefake.NewClientset(&coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "agent"},
	})
	leases := cs.CoordinationV1().Leases("kube-system")

	a, _ := leases.Get(ctx, "agent", metav1.GetOptions{})
	b, _ := leases.Get(ctx, "agent", metav1.GetOptions{})

	a.Spec.HolderIdentity = ptr.To("node-a")
	_, err := leases.Update(ctx, a, metav1.UpdateOptions{})
	fmt.Println("node-a takes the lease:", err == nil)

	b.Spec.HolderIdentity = ptr.To("node-b")
	_, err = leases.Update(ctx, b, metav1.UpdateOptions{})
	fmt.Println("node-b is refused with a conflict:", apierrors.IsConflict(err))
	// Output:
	// node-a takes the lease: true
	// node-b is refused with a conflict: true
}

// Two agents, each with its own client of one server. Both read the
// Lease; the first takes it, and the second's write from its stale read
// is refused. Then the first agent's network is cut: its renewal fails
// as a refused connection does, while the second agent, which still
// reaches the server, sees the Lease as the first left it.
func Example_partition() {
	ctx := context.Background()
	srv := kubefake.Config{}.NewServer(&coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "agent"},
	})
	nodeA, nodeB := srv.NewClient(), srv.NewClient()

	a, _ := nodeA.CoordinationV1().Leases("kube-system").Get(ctx, "agent", metav1.GetOptions{})
	b, _ := nodeB.CoordinationV1().Leases("kube-system").Get(ctx, "agent", metav1.GetOptions{})

	a.Spec.HolderIdentity = ptr.To("node-a")
	a, err := nodeA.CoordinationV1().Leases("kube-system").Update(ctx, a, metav1.UpdateOptions{})
	fmt.Println("node-a takes the lease:", err == nil)
	b.Spec.HolderIdentity = ptr.To("node-b")
	_, err = nodeB.CoordinationV1().Leases("kube-system").Update(ctx, b, metav1.UpdateOptions{})
	fmt.Println("node-b's stale write is refused:", apierrors.IsConflict(err))

	nodeA.Cut()
	_, err = nodeA.CoordinationV1().Leases("kube-system").Update(ctx, a, metav1.UpdateOptions{})
	fmt.Println("node-a, cut off, cannot renew:", utilnet.IsConnectionRefused(err))
	seen, _ := nodeB.CoordinationV1().Leases("kube-system").Get(ctx, "agent", metav1.GetOptions{})
	fmt.Println("node-b sees the holder:", *seen.Spec.HolderIdentity)

	nodeA.Heal()
	_, err = nodeA.CoordinationV1().Leases("kube-system").Update(ctx, a, metav1.UpdateOptions{})
	fmt.Println("node-a, healed, renews:", err == nil)
	// Output:
	// node-a takes the lease: true
	// node-b's stale write is refused: true
	// node-a, cut off, cannot renew: true
	// node-b sees the holder: node-a
	// node-a, healed, renews: true
}

// A test holds a loop to a request budget: it counts what the client
// sent between two snapshots, by verb and resource, with no reactor.
func ExampleClient_Requests() {
	ctx := context.Background()
	srv := kubefake.Config{}.NewServer()
	agent := srv.NewClient()

	before := agent.Requests()
	for range 3 { // a loop that polls a Lease that is not there
		_, _ = agent.CoordinationV1().Leases("kube-system").Get(ctx, "agent", metav1.GetOptions{})
	}
	sent := agent.Requests().Sub(before)
	fmt.Println("lease gets:", sent[kubefake.Request{Verb: "get", Resource: "leases"}])
	fmt.Println("in all:", sent.Total())
	// Output:
	// lease gets: 3
	// in all: 3
}

// An apiserver restart ends every watch, and a watch from a
// resourceVersion handed out before it gets 410 Gone as its one event:
// the client must list again.
func ExampleServer_Restart() {
	ctx := context.Background()
	srv := kubefake.Config{}.NewServer()
	cs := srv.NewClient()
	list, _ := cs.CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{})

	srv.Restart()
	w, err := cs.CoreV1().ConfigMaps("default").Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	fmt.Println("watch opened:", err == nil)
	ev := <-w.ResultChan()
	fmt.Println(ev.Type, apierrors.IsResourceExpired(apierrors.FromObject(ev.Object)))
	_, open := <-w.ResultChan()
	fmt.Println("still open:", open)
	// Output:
	// watch opened: true
	// ERROR true
	// still open: false
}
