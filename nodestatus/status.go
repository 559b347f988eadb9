package nodestatus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"

	"github.com/reconkit/reconkit/backoff"
)

// maxMessage bounds the Ready message taken from a Ping error.
const maxMessage = 1024

// nodePatchMeta is the strategic-merge schema of a Node; immutable, built
// once per controller (building it is cheap, holding one per node is not
// needed).
func nodePatchMeta() (strategicpatch.LookupPatchMeta, error) {
	return strategicpatch.NewPatchMetaFromStruct(&corev1.Node{})
}

// pingState is the outcome of the latest Ping as the status shows it.
type pingState struct {
	failing bool
	message string
}

// desired builds what the controller wants the Node's labels, annotations
// and status to be, from the provider's newest node and the ping state.
// Heartbeat and transition times are filled later, against the server copy.
func desired(src *corev1.Node, ping pingState, policy PingFailurePolicy) *corev1.Node {
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

// statusPatch computes the three-way strategic merge patch that takes server
// to d without touching what others wrote, and d with its last-applied
// annotation. The patch is nil when nothing needs writing. It carries
// server's resourceVersion, so a stale server copy gets 409 Conflict.
func statusPatch(meta strategicpatch.LookupPatchMeta, d, server *corev1.Node) ([]byte, *corev1.Node, error) {
	rec, err := newLastApplied(d).encode()
	if err != nil {
		return nil, nil, err
	}
	modified := d.DeepCopy()
	if modified.Annotations == nil {
		modified.Annotations = map[string]string{}
	}
	modified.Annotations[AnnotationLastApplied] = rec
	original := &corev1.Node{}
	if s, ok := server.Annotations[AnnotationLastApplied]; ok {
		la, err := decodeLastApplied(s)
		if err != nil {
			// Treat the node as never written by us: upsert, delete nothing.
			return patchWith(meta, original, modified, server, err)
		}
		original = la.node()
	}
	return patchWith(meta, original, modified, server, nil)
}

// errDecode is returned with a usable patch when the stored record was bad.
type errDecode struct{ err error }

func (e *errDecode) Error() string { return e.err.Error() }
func (e *errDecode) Unwrap() error { return e.err }

func patchWith(meta strategicpatch.LookupPatchMeta, original, modified, server *corev1.Node, decodeErr error) ([]byte, *corev1.Node, error) {
	ob, err := json.Marshal(original)
	if err != nil {
		return nil, nil, fmt.Errorf("nodestatus: marshal original: %w", err)
	}
	mb, err := json.Marshal(modified)
	if err != nil {
		return nil, nil, fmt.Errorf("nodestatus: marshal modified: %w", err)
	}
	cb, err := json.Marshal(server)
	if err != nil {
		return nil, nil, fmt.Errorf("nodestatus: marshal server copy: %w", err)
	}
	p, err := strategicpatch.CreateThreeWayMergePatch(ob, mb, cb, meta, true)
	if err != nil {
		return nil, nil, fmt.Errorf("nodestatus: three-way patch: %w", err)
	}
	var m map[string]any
	if err := json.Unmarshal(p, &m); err != nil {
		return nil, nil, fmt.Errorf("nodestatus: read patch: %w", err)
	}
	if len(m) == 0 {
		if decodeErr != nil {
			return nil, modified, &errDecode{decodeErr}
		}
		return nil, modified, nil
	}
	md, _ := m["metadata"].(map[string]any)
	if md == nil {
		md = map[string]any{}
		m["metadata"] = md
	}
	md["resourceVersion"] = server.ResourceVersion
	if server.UID != "" {
		md["uid"] = string(server.UID)
	}
	if p, err = json.Marshal(m); err != nil {
		return nil, nil, fmt.Errorf("nodestatus: write patch: %w", err)
	}
	if decodeErr != nil {
		return p, modified, &errDecode{decodeErr}
	}
	return p, modified, nil
}

// statusJob is one status write as the loop hands it to a worker: every
// field is owned by the worker until it reports back.
type statusJob struct {
	desired     *corev1.Node // labels, annotations, status (times unset)
	create      *corev1.Node // what to create if the Node is missing
	server      *corev1.Node // last server copy, nil to GET first
	heartbeat   bool         // stamp heartbeat times with now
	noHeartbeat bool         // never stamp them (heartbeats are stopped)
	uncordon    bool         // undo our own shutdown cordon
	registered  bool         // the Node was registered before: a 404 means deleted
}

type statusResult struct {
	server  *corev1.Node // new server copy (nil if unchanged)
	written bool         // a write reached the server
	created bool
	err     error // fatal: Run stops
}

// ErrNodeDeleted is wrapped by Run's error when the Node was deleted by
// someone else and Config.DisableReRegister is set.
var ErrNodeDeleted = errors.New("nodestatus: node was deleted")

// syncStatus registers, adopts or patches the Node, retrying with backoff
// until it succeeds, the error handler gives up, or ctx ends.
func (c *NodeController) syncStatus(ctx context.Context, job statusJob) statusResult {
	nodes := c.cfg.Client.CoreV1().Nodes()
	var res statusResult
	server := job.server
	attempt := func(ctx context.Context) error {
		rctx, cancel := context.WithTimeout(ctx, c.cfg.RequestTimeout)
		defer cancel()
		if server == nil {
			n, err := nodes.Get(rctx, c.name, metav1.GetOptions{})
			switch {
			case err == nil:
				server, res.server = n, n
			case apierrors.IsNotFound(err):
				if job.registered && c.cfg.DisableReRegister {
					return permanent(fmt.Errorf("%w: %s", ErrNodeDeleted, c.name))
				}
				n, err := c.createNode(rctx, job)
				if err != nil {
					return err
				}
				res.server, res.written, res.created = n, true, true
				server = n
				job.uncordon = false
				// Fall through: the create may have dropped parts of the
				// status, which the patch below then writes.
			default:
				return fmt.Errorf("get node: %w", err)
			}
		}
		if job.uncordon {
			if server.Spec.Unschedulable && server.Annotations[AnnotationCordoned] == "true" {
				p := fmt.Appendf(nil, `{"metadata":{"annotations":{%q:null},"resourceVersion":%q},"spec":{"unschedulable":null}}`, AnnotationCordoned, server.ResourceVersion)
				n, err := nodes.Patch(rctx, c.name, types.StrategicMergePatchType, p, metav1.PatchOptions{FieldManager: c.cfg.FieldManager})
				if err != nil {
					return c.patchFailed(err, &server)
				}
				server, res.server, res.written = n, n, true
			}
			job.uncordon = false
		}
		now := c.clk.Now()
		p, err := c.patchFor(ctx, job.desired, server, now, job.heartbeat)
		if err == nil && p != nil && !job.heartbeat && !job.noHeartbeat {
			// Something changed: the write is a status report as well.
			p, err = c.patchFor(ctx, job.desired, server, now, true)
		}
		if err != nil {
			return permanent(err)
		}
		if p == nil {
			return nil
		}
		n, err := nodes.Patch(rctx, c.name, types.StrategicMergePatchType, p, metav1.PatchOptions{FieldManager: c.cfg.FieldManager}, "status")
		if err != nil {
			return c.patchFailed(err, &server)
		}
		server, res.server, res.written = n, n, true
		return nil
	}
	err := c.retry(ctx, "status", func(ctx context.Context) error {
		err := attempt(ctx)
		if stale(err) {
			// A stale copy or a vanished Node: read it again at once.
			err = attempt(ctx)
		}
		return err
	})
	if err != nil && ctx.Err() == nil {
		res.err = err
	}
	return res
}

// patchFor stamps a copy of want against server and returns the patch (nil
// if nothing needs writing). An unreadable last-applied record is logged and
// treated as empty.
func (c *NodeController) patchFor(ctx context.Context, want, server *corev1.Node, now time.Time, heartbeat bool) ([]byte, error) {
	d := want.DeepCopy()
	stampTimes(d, server, now, heartbeat)
	p, _, err := statusPatch(c.patchMeta, d, server)
	var de *errDecode
	if errors.As(err, &de) {
		c.log(ctx).Info("Ignoring the unreadable last-applied annotation; nothing of it will be deleted", "error", de.err.Error())
		return p, nil
	}
	return p, err
}

// stale reports whether err means the held copy is outdated: the next
// attempt GETs first and may go at once.
func stale(err error) bool {
	return err != nil && !backoff.IsPermanent(err) && (apierrors.IsConflict(err) || apierrors.IsNotFound(err) || apierrors.IsAlreadyExists(err))
}

// patchFailed decides what a failed patch means for the held copy: a
// conflict or a missing Node makes the next attempt GET first.
func (c *NodeController) patchFailed(err error, server **corev1.Node) error {
	switch {
	case apierrors.IsConflict(err):
		*server = nil
		return fmt.Errorf("patch node: stale copy: %w", err)
	case apierrors.IsNotFound(err):
		*server = nil
		return fmt.Errorf("patch node: %w", err)
	}
	return fmt.Errorf("patch node: %w", err)
}

func (c *NodeController) createNode(ctx context.Context, job statusJob) (*corev1.Node, error) {
	n := job.create.DeepCopy()
	n.ResourceVersion, n.UID = "", ""
	d := job.desired.DeepCopy()
	stampTimes(d, nil, c.clk.Now(), true)
	rec, err := newLastApplied(d).encode()
	if err != nil {
		return nil, permanent(err)
	}
	n.Labels = d.Labels
	n.Annotations = d.Annotations
	if n.Annotations == nil {
		n.Annotations = map[string]string{}
	}
	n.Annotations[AnnotationLastApplied] = rec
	n.Status = d.Status
	created, err := c.cfg.Client.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{FieldManager: c.cfg.FieldManager})
	if err != nil {
		if apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("create node: raced with another writer: %w", err)
		}
		return nil, fmt.Errorf("create node: %w", err)
	}
	return created, nil
}
