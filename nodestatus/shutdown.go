package nodestatus

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// shutdown performs Config.OnShutdown on the registered Node.
func (c *NodeController) shutdown(ctx context.Context, uid types.UID) error {
	nodes := c.cfg.Client.CoreV1().Nodes()
	switch c.cfg.OnShutdown {
	case ShutdownCordon:
		// Read the Node fresh (the kept copy does not follow spec changes):
		// a node an administrator cordoned must not get our mark.
		start := c.clk.Now()
		cur, err := nodes.Get(ctx, c.name, metav1.GetOptions{})
		c.metrics.Observe(observation(context.Background(), CallGetNode, err, c.clk.Since(start)))
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
		start = c.clk.Now()
		_, err = nodes.Patch(ctx, c.name, types.StrategicMergePatchType, p, metav1.PatchOptions{FieldManager: c.cfg.FieldManager})
		c.metrics.Observe(observation(context.Background(), CallPatchNode, err, c.clk.Since(start)))
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("cordon: %w", err)
		}
	case ShutdownDelete:
		start := c.clk.Now()
		err := nodes.Delete(ctx, c.name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
		c.metrics.Observe(observation(context.Background(), CallDeleteNode, err, c.clk.Since(start)))
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return fmt.Errorf("delete node: %w", err)
		}
		if !c.cfg.DisableLease {
			start := c.clk.Now()
			err := c.cfg.LeaseClient.CoordinationV1().Leases(c.cfg.LeaseNamespace).Delete(ctx, c.name, metav1.DeleteOptions{})
			c.metrics.Observe(observation(context.Background(), CallDeleteLease, err, c.clk.Since(start)))
			if err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("delete lease: %w", err)
			}
		}
	}
	return nil
}

// uncordon undoes this controller's own shutdown cordon on server, and
// only that: the cordon is ours while the AnnotationCordoned mark is there
// and this controller's field manager is the only one that owns
// spec.unschedulable. After `kubectl uncordon` (which leaves the mark
// behind) and a later `kubectl cordon` or drain, kubectl owns the field,
// and the cordon stays; the stale mark is removed either way. It returns
// the new server copy, or nil when nothing was written.
func (c *NodeController) uncordon(ctx, rctx context.Context, server *corev1.Node) (*corev1.Node, error) {
	if _, ok := server.Annotations[AnnotationCordoned]; !ok {
		return nil, nil
	}
	var p []byte
	if server.Spec.Unschedulable && ownsOnly(server.ManagedFields, c.cfg.FieldManager, "f:spec", "f:unschedulable") {
		p = fmt.Appendf(nil, `{"metadata":{"annotations":{%q:null},"resourceVersion":%q},"spec":{"unschedulable":null}}`, AnnotationCordoned, server.ResourceVersion)
	} else {
		if server.Spec.Unschedulable {
			c.log(ctx).Info("Leaving the node cordoned: the cordon is no longer ours")
		}
		p = fmt.Appendf(nil, `{"metadata":{"annotations":{%q:null},"resourceVersion":%q}}`, AnnotationCordoned, server.ResourceVersion)
	}
	start := c.clk.Now()
	n, err := c.cfg.Client.CoreV1().Nodes().Patch(rctx, c.name, types.StrategicMergePatchType, p, metav1.PatchOptions{FieldManager: c.cfg.FieldManager})
	if err = c.observe(ctx, CallPatchNode, start, err); err != nil {
		return nil, fmt.Errorf("undo the shutdown cordon: %w", err)
	}
	return n, nil
}

// ownsOnly reports whether manager owns the field at path (in the main
// resource, not a subresource) and no other manager does.
func ownsOnly(entries []metav1.ManagedFieldsEntry, manager string, path ...string) bool {
	ours := false
	for _, e := range entries {
		if e.Subresource != "" || e.FieldsV1 == nil || !hasField(e.FieldsV1.GetRawBytes(), path) {
			continue
		}
		if e.Manager != manager {
			return false
		}
		ours = true
	}
	return ours
}

func hasField(raw []byte, path []string) bool {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return false
	}
	v, ok := m[path[0]]
	if !ok {
		return false
	}
	if len(path) == 1 {
		return true
	}
	return hasField(bytes.TrimSpace(v), path[1:])
}
