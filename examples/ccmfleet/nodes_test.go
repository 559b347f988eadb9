package ccmfleet_test

import (
	"context"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	"github.com/reconkit/reconkit/fleetsim"
)

// nodeChurn is the fleet's node churn, as operator edits that the nemesis
// makes at random times drawn from the seed (fleetsim.OperatorEdit) and
// undoes 20 s to 2 min later, at the latest when the quiet period begins:
// a node joins and leaves, one leaves and comes back, one flaps NotReady
// and Ready, one is labelled out of the load balancers and back. Each Do
// and Undo is idempotent, as two of one edit may overlap. A node joining,
// leaving or changing its exclusion label makes the Driver's node sync
// call UpdateLoadBalancer for every LoadBalancer Service; a node turning
// NotReady does not (see the package documentation).
func nodeChurn() []fleetsim.Edit {
	return []fleetsim.Edit{
		{Name: "Node node-c joins",
			Do: func(ctx context.Context, c kubernetes.Interface) error {
				return createNode(ctx, c, node("node-c", "10.0.1.3"))
			},
			Undo: func(ctx context.Context, c kubernetes.Interface) error { return deleteNode(ctx, c, "node-c") }},
		{Name: "Node node-b leaves",
			Do: func(ctx context.Context, c kubernetes.Interface) error { return deleteNode(ctx, c, "node-b") },
			Undo: func(ctx context.Context, c kubernetes.Interface) error {
				return createNode(ctx, c, node("node-b", "10.0.1.2"))
			}},
		{Name: "Node node-a NotReady",
			Do: func(ctx context.Context, c kubernetes.Interface) error {
				return setReady(ctx, c, "node-a", v1.ConditionFalse)
			},
			Undo: func(ctx context.Context, c kubernetes.Interface) error {
				return setReady(ctx, c, "node-a", v1.ConditionTrue)
			}},
		{Name: "Node node-a excluded from load balancers",
			Do:   func(ctx context.Context, c kubernetes.Interface) error { return setExcluded(ctx, c, "node-a", true) },
			Undo: func(ctx context.Context, c kubernetes.Interface) error { return setExcluded(ctx, c, "node-a", false) }},
	}
}

func createNode(ctx context.Context, c kubernetes.Interface, n *v1.Node) error {
	_, err := c.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

func deleteNode(ctx context.Context, c kubernetes.Interface, name string) error {
	err := c.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// setReady sets the node's Ready condition, as its kubelet (or the node
// lifecycle controller) would.
func setReady(ctx context.Context, c kubernetes.Interface, name string, s v1.ConditionStatus) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := c.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for i := range n.Status.Conditions {
			if n.Status.Conditions[i].Type == v1.NodeReady {
				n.Status.Conditions[i].Status = s
			}
		}
		_, err = c.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
		return err
	})
}

// setExcluded labels the node node.kubernetes.io/exclude-from-external-load-balancers
// or removes the label.
func setExcluded(ctx context.Context, c kubernetes.Interface, name string, excluded bool) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := c.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if excluded {
			if n.Labels == nil {
				n.Labels = map[string]string{}
			}
			n.Labels[v1.LabelNodeExcludeBalancers] = "true"
		} else {
			delete(n.Labels, v1.LabelNodeExcludeBalancers)
		}
		_, err = c.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
		return err
	})
}
