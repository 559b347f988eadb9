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
func (s *statusSync) getOrCreate(ctx, rctx context.Context, want *corev1.Node, src *packedNode, ping pingState) (*corev1.Node, bool, error) {
	c := s.c
	opts := metav1.GetOptions{}
	if !s.fresh {
		opts.ResourceVersion = "0"
	}
	start := c.clk.Now()
	n, err := c.cfg.Client.CoreV1().Nodes().Get(rctx, c.name, opts)
	err = c.observe(ctx, CallGetNode, start, err)
	switch {
	case err == nil:
		return n, false, nil
	case apierrors.IsNotFound(err) && !isStop(err):
		if s.job.registered && !c.cfg.ReRegister {
			return nil, false, permanent(fmt.Errorf("%w: %s", ErrNodeDeleted, c.name))
		}
		n, err := s.createNode(ctx, rctx, want, src, ping)
		if err != nil {
			return nil, false, err
		}
		return n, true, nil
	}
	return nil, false, fmt.Errorf("get node: %w", err)
}

// errRefusedAsIs is the error of a registration whose every form the API
// server refused for the provider's current node and ping result.
var errRefusedAsIs = errors.New("every form of the node was refused; waiting for the provider's node or the ping result to change")

// createNode registers the Node, falling back to reduced forms when the
// API server refuses one for good, as status writes do, and sharing their
// memory of refusals: a form refused (as a create or as a status patch)
// is not sent again until the provider's node changes, so a Node deleted
// and registered again, or a registration retried, starts from the form
// the API server accepted.
func (s *statusSync) createNode(ctx, rctx context.Context, want *corev1.Node, src *packedNode, ping pingState) (*corev1.Node, error) {
	c := s.c
	provided := c.provided(src)
	build := func(level patchLevel) (*corev1.Node, error) {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: c.name}}
		provided.Spec.DeepCopyInto(&n.Spec)
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
	first, ok := s.res.refused.start(src, ping)
	if !ok {
		return nil, fmt.Errorf("create node: %w", errRefusedAsIs)
	}
	for level := first; level <= levelConditions; level++ {
		n, err := build(level)
		if errors.Is(err, errRecordTooLarge) {
			var stop error
			if s.res.rejected, stop = c.rejectLocal(ctx, err); stop != nil {
				return nil, stop
			}
			s.refuse(src, ping, level)
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
			if level == levelFull {
				s.res.refused, s.res.rejected = nil, nil
			}
			return created, nil
		case errors.Is(err, ErrRejected) && !isStop(err):
			s.res.rejected = err
			s.refuse(src, ping, level)
			continue
		case apierrors.IsAlreadyExists(err):
			return nil, fmt.Errorf("create node: raced with another writer: %w", err)
		}
		return nil, fmt.Errorf("create node: %w", err)
	}
	// Retried with backoff: each attempt starts from the provider's newest
	// node, which may have been corrected meanwhile.
	return nil, fmt.Errorf("create node: %w", s.res.rejected)
}
