package kubefake_test

import (
	"context"
	"fmt"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
