package nodestatus

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// getOrCreate reads the Node (from the apiserver's cache unless fresh) or,
// when it is missing, registers it from the provider's newest node.
func (c *NodeController) getOrCreate(ctx, rctx context.Context, want *corev1.Node, job statusJob, fresh bool) (*corev1.Node, bool, error) {
	opts := metav1.GetOptions{}
	if !fresh {
		opts.ResourceVersion = "0"
	}
	start := c.clk.Now()
	n, err := c.cfg.Client.CoreV1().Nodes().Get(rctx, c.name, opts)
	err = c.observe(ctx, CallGetNode, start, err)
	switch {
	case err == nil:
		return n, false, nil
	case apierrors.IsNotFound(err) && !isStop(err):
		if job.registered && !c.cfg.ReRegister {
			return nil, false, permanent(fmt.Errorf("%w: %s", ErrNodeDeleted, c.name))
		}
		n, err := c.createNode(ctx, rctx, want)
		if err != nil {
			return nil, false, err
		}
		return n, true, nil
	}
	return nil, false, fmt.Errorf("get node: %w", err)
}

func (c *NodeController) createNode(ctx, rctx context.Context, want *corev1.Node) (*corev1.Node, error) {
	src := c.provided(c.latest.Load())
	build := func(level patchLevel) (*corev1.Node, error) {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: c.name}}
		src.Spec.DeepCopyInto(&n.Spec)
		d := reduce(want, nil, level)
		stampTimes(d, nil, c.clk.Now(), true)
		rec, err := newLastApplied(d).encode()
		if err != nil {
			return nil, err
		}
		n.Labels = d.Labels
		n.Annotations = d.Annotations
		if n.Annotations == nil {
			n.Annotations = map[string]string{}
		}
		n.Annotations[AnnotationLastApplied] = rec
		n.Status = d.Status
		return n, nil
	}
	var rejected error
	for _, level := range []patchLevel{levelFull, levelStatus} {
		n, err := build(level)
		if errors.Is(err, errRecordTooLarge) {
			var stop error
			if rejected, stop = c.rejectLocal(ctx, err); stop != nil {
				return nil, stop
			}
			continue
		}
		if err != nil {
			return nil, permanent(err)
		}
		start := c.clk.Now()
		created, err := c.cfg.Client.CoreV1().Nodes().Create(rctx, n, metav1.CreateOptions{FieldManager: c.cfg.FieldManager})
		err = c.observe(ctx, CallCreateNode, start, err)
		switch {
		case err == nil:
			return created, nil
		case errors.Is(err, ErrRejected) && !isStop(err):
			rejected = err
			continue
		case apierrors.IsAlreadyExists(err):
			return nil, fmt.Errorf("create node: raced with another writer: %w", err)
		}
		return nil, fmt.Errorf("create node: %w", err)
	}
	// Retried with backoff: each attempt starts from the provider's newest
	// node, which may have been corrected meanwhile.
	return nil, fmt.Errorf("create node: %w", rejected)
}
