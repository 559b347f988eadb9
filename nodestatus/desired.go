package nodestatus

import (
	"maps"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// maxMessage bounds the Ready message taken from a Ping error.
const maxMessage = 1024

// pingState is the outcome of the latest Ping as the status shows it.
type pingState struct {
	failing bool
	message string
}

// desired builds what the controller wants the Node's labels, annotations
// and status to be, from the provider's newest node, the ping state and the
// conditions the controller reports where the provider does not.
// Heartbeat and transition times are filled later, against the server copy.
func desired(src *corev1.Node, ping pingState, policy PingFailurePolicy, defaults []corev1.NodeCondition) *corev1.Node {
	d := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: src.Name}}
	if len(src.Labels) > 0 {
		d.Labels = maps.Clone(src.Labels)
	}
	for k, v := range src.Annotations {
		if k == AnnotationLastApplied || k == AnnotationCordoned {
			continue
		}
		if d.Annotations == nil {
			d.Annotations = make(map[string]string, len(src.Annotations))
		}
		d.Annotations[k] = v
	}
	src.Status.DeepCopyInto(&d.Status)
	has := func(t corev1.NodeConditionType) bool {
		for _, c := range d.Status.Conditions {
			if c.Type == t {
				return true
			}
		}
		return false
	}
	for _, c := range defaults {
		if !has(c.Type) {
			c.LastHeartbeatTime, c.LastTransitionTime = metav1.Time{}, metav1.Time{}
			d.Status.Conditions = append(d.Status.Conditions, c)
		}
	}
	ready := -1
	for i, c := range d.Status.Conditions {
		if c.Type == corev1.NodeReady {
			ready = i
		}
	}
	if ready < 0 {
		d.Status.Conditions = append(d.Status.Conditions, corev1.NodeCondition{
			Type:   corev1.NodeReady,
			Status: corev1.ConditionTrue,
			Reason: ReasonReady,
		})
		ready = len(d.Status.Conditions) - 1
	}
	if ping.failing && policy == PingFailureSetNotReady {
		c := &d.Status.Conditions[ready]
		c.Status = corev1.ConditionFalse
		c.Reason = ReasonPingFailed
		c.Message = ping.message
		c.LastTransitionTime = metav1.Time{}
	}
	return d
}

// stampTimes fills each condition's heartbeat and transition times: the
// heartbeat is now when a report is due and otherwise the server's, so that
// an unchanged status yields an empty patch; the transition time is kept
// from the server while the condition's status is unchanged.
func stampTimes(d, server *corev1.Node, now time.Time, heartbeat bool) {
	t := metav1.NewTime(now).Rfc3339Copy()
	for i := range d.Status.Conditions {
		c := &d.Status.Conditions[i]
		var old *corev1.NodeCondition
		if server != nil {
			for j := range server.Status.Conditions {
				if server.Status.Conditions[j].Type == c.Type {
					old = &server.Status.Conditions[j]
					break
				}
			}
		}
		switch {
		case heartbeat || old == nil || old.LastHeartbeatTime.IsZero():
			c.LastHeartbeatTime = t
		default:
			c.LastHeartbeatTime = old.LastHeartbeatTime
		}
		if c.LastTransitionTime.IsZero() {
			if old != nil && old.Status == c.Status && !old.LastTransitionTime.IsZero() {
				c.LastTransitionTime = old.LastTransitionTime
			} else {
				c.LastTransitionTime = t
			}
		}
	}
}

// want is the desired node now: the provider's node src (see provided)
// and ping, the newest ping result.
func (c *NodeController) want(src *packedNode, ping pingState) *corev1.Node {
	defaults := c.cfg.DefaultConditions
	if defaults == nil {
		defaults = StandardConditions()
	}
	return desired(c.provided(src), ping, c.cfg.PingFailure, defaults)
}

// provided decodes src, the provider's node as c.latest held it.
func (c *NodeController) provided(src *packedNode) *corev1.Node {
	n := src.unpack()
	if n == nil {
		// Cannot happen: it was encoded by packNode.
		n = &corev1.Node{}
	}
	n.Name = c.name
	return n
}
