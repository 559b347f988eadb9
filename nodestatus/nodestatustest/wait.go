package nodestatustest

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
)

// watchRound bounds one watch: after it, the Node is read again. On a real
// API server the watch resumes from the version read, so nothing is missed;
// client-go's fake clientset keeps no versions, and a change made between
// the read and the watch is seen at the next read.
const watchRound = 5 * time.Second

// WaitForNode waits until the Node called name exists and cond holds for
// it, and returns that Node. It reads the Node, then watches it, so it sees
// every change without polling. It gives up when ctx ends (give it a
// deadline) with an error that shows the Node as last seen.
func WaitForNode(ctx context.Context, cs kubernetes.Interface, name string, cond func(*corev1.Node) bool) (*corev1.Node, error) {
	var last *corev1.Node
	var lastErr error
	fail := func() (*corev1.Node, error) {
		if last == nil {
			if lastErr == nil {
				return nil, fmt.Errorf("nodestatustest: node %s: never seen (not found): %w", name, ctx.Err())
			}
			return nil, fmt.Errorf("nodestatustest: node %s: never seen: %w (last error: %v)", name, ctx.Err(), lastErr)
		}
		return nil, fmt.Errorf("nodestatustest: node %s: condition not met: %w; last seen: labels %v, conditions %v, addresses %v",
			name, ctx.Err(), last.Labels, summary(last.Status.Conditions), last.Status.Addresses)
	}
	for {
		n, err := cs.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		rv := ""
		switch {
		case err == nil:
			last, rv = n, n.ResourceVersion
			if cond(n) {
				return n, nil
			}
		case !apierrors.IsNotFound(err):
			lastErr = err
		}
		if ctx.Err() != nil {
			return fail()
		}
		wctx, cancel := context.WithTimeout(ctx, watchRound)
		w, err := cs.CoreV1().Nodes().Watch(wctx, metav1.ListOptions{
			FieldSelector:   fields.OneTermEqualSelector("metadata.name", name).String(),
			ResourceVersion: rv,
		})
		if err != nil {
			lastErr = err
			<-wctx.Done() // read again after the round
			cancel()
			continue
		}
		found := func() *corev1.Node {
			defer w.Stop()
			for {
				select {
				case <-wctx.Done():
					return nil
				case ev, ok := <-w.ResultChan():
					if !ok {
						return nil
					}
					n, isNode := ev.Object.(*corev1.Node)
					if !isNode || n.Name != name {
						continue
					}
					last = n
					if ev.Type != "DELETED" && cond(n) {
						return n
					}
				}
			}
		}()
		cancel()
		if found != nil {
			return found, nil
		}
	}
}

func summary(conds []corev1.NodeCondition) []string {
	var out []string
	for _, c := range conds {
		out = append(out, fmt.Sprintf("%s=%s(%s)", c.Type, c.Status, c.Reason))
	}
	return out
}

// ConditionIs is a WaitForNode condition: the Node has a condition of type
// t with status s and, unless reason is empty, that reason.
func ConditionIs(t corev1.NodeConditionType, s corev1.ConditionStatus, reason string) func(*corev1.Node) bool {
	return func(n *corev1.Node) bool {
		for _, c := range n.Status.Conditions {
			if c.Type == t {
				return c.Status == s && (reason == "" || c.Reason == reason)
			}
		}
		return false
	}
}

// WaitForCondition waits until the Node called name has a condition of
// type t with status s (and reason, unless empty); see WaitForNode.
func WaitForCondition(ctx context.Context, cs kubernetes.Interface, name string, t corev1.NodeConditionType, s corev1.ConditionStatus, reason string) (*corev1.Node, error) {
	return WaitForNode(ctx, cs, name, ConditionIs(t, s, reason))
}
