package nodestatus

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// shutdown performs Config.OnShutdown on the registered Node.
func (c *NodeController) shutdown(ctx context.Context, server *corev1.Node) error {
	nodes := c.cfg.Client.CoreV1().Nodes()
	switch c.cfg.OnShutdown {
	case ShutdownCordon:
		// Read the Node fresh (the held copy does not follow spec changes):
		// a node an administrator cordoned must not get our mark, or the
		// next Run would make it schedulable.
		cur, err := nodes.Get(ctx, c.name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("cordon: %w", err)
		}
		if cur.Spec.Unschedulable {
			return nil
		}
		p := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:"true"},"resourceVersion":%q},"spec":{"unschedulable":true}}`, AnnotationCordoned, cur.ResourceVersion)
		_, err = nodes.Patch(ctx, c.name, types.StrategicMergePatchType, p, metav1.PatchOptions{FieldManager: c.cfg.FieldManager})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("cordon: %w", err)
		}
	case ShutdownDelete:
		uid := server.UID
		err := nodes.Delete(ctx, c.name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return fmt.Errorf("delete node: %w", err)
		}
		if !c.cfg.DisableLease {
			err := c.cfg.Client.CoordinationV1().Leases(c.cfg.LeaseNamespace).Delete(ctx, c.name, metav1.DeleteOptions{})
			if err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("delete lease: %w", err)
			}
		}
	}
	return nil
}
