package nodestatus

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"

	"github.com/reconkit/reconkit/backoff"
)

// maxMessage bounds the Ready message taken from a Ping error.
const maxMessage = 1024

// nodePatchMeta is the strategic-merge schema of a Node; immutable, built
// once per controller.
func nodePatchMeta() (strategicpatch.LookupPatchMeta, error) {
	return strategicpatch.NewPatchMetaFromStruct(&corev1.Node{})
}

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

// patchLevel is how much of the desired node one status write carries. A
// write the API server rejects for good is tried again at the next level,
// so that one bad field never stops the heartbeat or the Ready condition.
type patchLevel int

const (
	// levelFull writes labels, annotations and status.
	levelFull patchLevel = iota
	// levelStatus leaves labels and annotations as last written.
	levelStatus
	// levelConditions writes conditions only; the rest of the status stays
	// as last written.
	levelConditions
)

func (l patchLevel) String() string {
	return [...]string{"full", "status only", "conditions only"}[l]
}

// reduce returns d cut down to level: what it leaves out is taken from rec,
// the record of what was last written (nil if none is readable), so that
// the write changes nothing there.
func reduce(d *corev1.Node, rec *lastApplied, level patchLevel) *corev1.Node {
	if level == levelFull {
		return d
	}
	out := d.DeepCopy()
	out.Labels, out.Annotations = nil, nil
	if rec != nil {
		out.Labels, out.Annotations = maps.Clone(rec.Labels), maps.Clone(rec.Annotations)
	}
	if level == levelConditions {
		conds := out.Status.Conditions
		out.Status = corev1.NodeStatus{}
		if rec != nil {
			rec.Status.DeepCopyInto(&out.Status)
		}
		out.Status.Conditions = conds
	}
	return out
}

// serverRecord decodes the last-applied record on server; nil (and the
// reason) when there is none or it is unreadable, in which case the write
// upserts and deletes nothing.
func serverRecord(server *corev1.Node) (*lastApplied, error) {
	s, ok := server.Annotations[AnnotationLastApplied]
	if !ok {
		return nil, nil
	}
	return decodeLastApplied(s)
}

// statusPatch computes the patch that takes server to d (stamped) without
// touching what others wrote, or nil when the served Node already is what
// d asks for. rec is the record of what was last written (the "original").
//
// Labels, annotations, conditions and the other status fields are merged
// three-way. Addresses are replaced as a whole, as the kubelet does: their
// merge key (type) is not unique, so a merge corrupts dual-stack lists.
// They are written only when d has some or the record has some (a provider
// that never reported addresses leaves those of others alone). Zero fields
// of nodeInfo and daemonEndpoints are left out, so that a provider that does
// not set them does not overwrite what others wrote. The patch carries
// server's resourceVersion, so a stale server copy gets 409 Conflict.
func statusPatch(meta strategicpatch.LookupPatchMeta, d, server *corev1.Node, rec *lastApplied) ([]byte, error) {
	enc, err := newLastApplied(d).encode()
	if err != nil {
		return nil, err
	}
	modified := d.DeepCopy()
	if modified.Annotations == nil {
		modified.Annotations = map[string]string{}
	}
	modified.Annotations[AnnotationLastApplied] = enc
	original := &corev1.Node{}
	if rec != nil {
		original = rec.node()
	}
	var ob, mb, cb []byte
	for _, x := range []struct {
		n   *corev1.Node
		out *[]byte
	}{{original, &ob}, {modified, &mb}, {server, &cb}} {
		if *x.out, err = mergeView(x.n); err != nil {
			return nil, err
		}
	}
	p, err := strategicpatch.CreateThreeWayMergePatch(ob, mb, cb, meta, true)
	if err != nil {
		return nil, fmt.Errorf("nodestatus: three-way patch: %w", err)
	}
	var pm map[string]any
	if err := json.Unmarshal(p, &pm); err != nil {
		return nil, fmt.Errorf("nodestatus: read patch: %w", err)
	}
	// Element order is not a change: the server keeps its own order, and
	// an order-only patch would be sent at every write.
	stripOrder(pm)
	ownAddresses := len(d.Status.Addresses) > 0 || (rec != nil && len(rec.Status.Addresses) > 0)
	if ownAddresses && !sameAddresses(d.Status.Addresses, server.Status.Addresses) {
		list := make([]any, 0, len(d.Status.Addresses)+1)
		for _, a := range d.Status.Addresses {
			list = append(list, map[string]any{"type": string(a.Type), "address": a.Address})
		}
		list = append(list, map[string]any{"$patch": "replace"})
		st, _ := pm["status"].(map[string]any)
		if st == nil {
			st = map[string]any{}
			pm["status"] = st
		}
		st["addresses"] = list
	}
	if len(pm) == 0 {
		return nil, nil
	}
	if p, err = json.Marshal(pm); err != nil {
		return nil, fmt.Errorf("nodestatus: write patch: %w", err)
	}
	// Only a real difference is written: apply the patch to the served
	// Node the way the API server does and compare.
	same, err := noChange(meta, server, p)
	if err != nil {
		return nil, err
	}
	if same {
		return nil, nil
	}
	md, _ := pm["metadata"].(map[string]any)
	if md == nil {
		md = map[string]any{}
		pm["metadata"] = md
	}
	md["resourceVersion"] = server.ResourceVersion
	if server.UID != "" {
		md["uid"] = string(server.UID)
	}
	if p, err = json.Marshal(pm); err != nil {
		return nil, fmt.Errorf("nodestatus: write patch: %w", err)
	}
	return p, nil
}

// mergeView is the part of n the three-way merge compares: labels,
// annotations and status without addresses, and without zero fields in
// nodeInfo and daemonEndpoints.
func mergeView(n *corev1.Node) ([]byte, error) {
	b, err := json.Marshal(n)
	if err != nil {
		return nil, fmt.Errorf("nodestatus: marshal node: %w", err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("nodestatus: read node: %w", err)
	}
	view := map[string]any{}
	if md, _ := m["metadata"].(map[string]any); md != nil {
		v := map[string]any{}
		for _, k := range []string{"labels", "annotations"} {
			if x, ok := md[k]; ok {
				v[k] = x
			}
		}
		view["metadata"] = v
	}
	if st, _ := m["status"].(map[string]any); st != nil {
		delete(st, "addresses")
		for _, k := range []string{"nodeInfo", "daemonEndpoints"} {
			if sub, ok := st[k].(map[string]any); ok && dropZero(sub) {
				delete(st, k)
			}
		}
		view["status"] = st
	}
	return json.Marshal(view)
}

// dropZero deletes unset leaves from m, a nodeInfo or daemonEndpoints
// object, and reports whether m is empty afterwards. Unset there is an
// empty string, a null, an empty object, or a Port of 0 (DaemonEndpoint's
// only plain number). Every bool and every other number in these objects
// is a pointer field that omitempty leaves out when unset, so an explicit
// false (runningInUserNamespace) or 0 (swap capacity) is a value the
// provider reported, and stays.
func dropZero(m map[string]any) bool {
	for k, v := range m {
		switch x := v.(type) {
		case nil:
			delete(m, k)
		case string:
			if x == "" {
				delete(m, k)
			}
		case float64:
			if x == 0 && k == "Port" {
				delete(m, k)
			}
		case map[string]any:
			if dropZero(x) {
				delete(m, k)
			}
		}
	}
	return len(m) == 0
}

// stripOrder removes $setElementOrder directives and the objects they
// leave empty.
func stripOrder(m map[string]any) bool {
	for k, v := range m {
		if strings.HasPrefix(k, "$setElementOrder/") {
			delete(m, k)
			continue
		}
		if sub, ok := v.(map[string]any); ok && stripOrder(sub) {
			delete(m, k)
		}
	}
	return len(m) == 0
}

func sameAddresses(a, b []corev1.NodeAddress) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// noChange reports whether applying patch to server leaves it as it is.
func noChange(meta strategicpatch.LookupPatchMeta, server *corev1.Node, patch []byte) (bool, error) {
	cur, err := json.Marshal(server)
	if err != nil {
		return false, fmt.Errorf("nodestatus: marshal server copy: %w", err)
	}
	after, err := strategicpatch.StrategicMergePatchUsingLookupPatchMeta(cur, patch, meta)
	if err != nil {
		return false, fmt.Errorf("nodestatus: apply patch: %w", err)
	}
	var a, b corev1.Node
	if err := json.Unmarshal(cur, &b); err != nil {
		return false, fmt.Errorf("nodestatus: read server copy: %w", err)
	}
	if err := json.Unmarshal(after, &a); err != nil {
		return false, fmt.Errorf("nodestatus: read patched copy: %w", err)
	}
	return apiequality.Semantic.DeepEqual(&a, &b), nil
}

// statusJob is one status write as the loop hands it to a worker: every
// field is owned by the worker until it reports back. The desired status is
// not part of it: each attempt computes it from the provider's newest.
type statusJob struct {
	refused     *refusal    // what the API server refused for good, nil if nothing
	server      *packedNode // last server copy, nil to GET first
	fresh       bool        // GET it linearizably, not from the apiserver's cache
	heartbeat   bool        // stamp heartbeat times with now
	noHeartbeat bool        // never stamp them (heartbeats are stopped)
	uncordon    bool        // undo our own shutdown cordon
	registered  bool        // the Node was registered before: a 404 means deleted
	limited     bool        // holds a unit of Config.Limiter for its first attempt
}

type statusResult struct {
	server   *packedNode // new server copy (nil if unchanged), encoded on the worker
	written  bool        // a write reached the server
	created  bool
	rejected error    // the newest desired status was refused for good; what was written is reduced
	refused  *refusal // the refusal the next job starts from
	failures int      // attempts that failed before the job ended
	err      error    // fatal: Run stops
}

// refusal remembers that the API server refused for good what the
// provider's node src asked for, so that it is never sent again as it is:
// until the provider's node changes, writes start at level, the first
// that was not refused. When every level was refused (level is past
// levelConditions), the conditions are tried again only when the ping
// result differs from ping, the one they were refused with.
type refusal struct {
	src   []byte // the provider's node, as packed in NodeController.latest
	level patchLevel
	ping  pingState
}

// start returns the level a write of src with ping starts at, and false
// when nothing may be sent.
func (r *refusal) start(src *packedNode, ping pingState) (patchLevel, bool) {
	if r == nil || src.raw == nil || !bytes.Equal(r.src, src.raw) {
		return levelFull, true
	}
	if r.level <= levelConditions {
		return r.level, true
	}
	return levelConditions, ping != r.ping
}

// ErrNodeDeleted is wrapped by Run's error when the Node was deleted by
// someone else and Config.ReRegister is off.
var ErrNodeDeleted = errors.New("nodestatus: node was deleted")

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

// syncStatus registers, adopts or patches the Node, retrying transient
// failures with backoff until it succeeds, the error handler gives up, or
// ctx ends. Each attempt starts from the provider's newest status, so a
// correction is never held up behind a failing write.
func (c *NodeController) syncStatus(ctx context.Context, job statusJob) statusResult {
	var res statusResult
	var got *corev1.Node          // the newest server copy this job received
	server := job.server.unpack() // decoded here: deep decoding would grow the loop's stack
	fresh := job.fresh            // read from storage rather than the apiserver's cache
	stale := false                // the attempt found its copy outdated
	res.refused = job.refused
	attempt := func(ctx context.Context) error {
		stale = false
		rctx, cancel := context.WithTimeout(ctx, c.cfg.RequestTimeout)
		defer cancel()
		src, ping := c.latest.Load(), *c.ping.Load()
		want := c.want(src, ping)
		refuse := func(level patchLevel) {
			if src.raw != nil {
				res.refused = &refusal{src: src.raw, level: level + 1, ping: ping}
			}
		}
		if server == nil {
			n, created, err := c.getOrCreate(ctx, rctx, want, job, fresh)
			if apierrors.IsAlreadyExists(err) {
				fresh, stale = true, true // registered meanwhile: adopt it
			}
			if err != nil {
				return err
			}
			server, got = n, n
			if created {
				res.written, res.created = true, true
				job.uncordon = false
				// Go on: the create may have dropped parts of the
				// status, which the patch below then writes.
			}
		}
		if job.uncordon {
			n, err := c.uncordon(ctx, rctx, server)
			if errors.Is(err, ErrRejected) && !isStop(err) {
				c.log(ctx).Info("Cannot undo the shutdown cordon", "error", err.Error())
				n, err = nil, nil
			}
			if err != nil {
				if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
					server, fresh, stale = nil, true, true
				}
				return err
			}
			if n != nil {
				server, got, res.written = n, n, true
			}
			job.uncordon = false
		}
		now := c.clk.Now()
		rec, recErr := serverRecord(server)
		if recErr != nil {
			c.log(ctx).Info("Ignoring the unreadable last-applied annotation; nothing of it will be deleted", "error", recErr.Error())
		}
		res.rejected = nil
		first, ok := res.refused.start(src, ping)
		if !ok {
			return nil // refused as it is: wait for a change
		}
		for level := first; level <= levelConditions; level++ {
			d := reduce(want, rec, level)
			p, err := c.patchFor(d, server, rec, now, job)
			if errors.Is(err, errRecordTooLarge) {
				if res.rejected, err = c.rejectLocal(ctx, err); err != nil {
					return err
				}
				refuse(level)
				continue
			}
			if err != nil {
				return permanent(err)
			}
			if p == nil {
				if level == levelFull {
					res.refused = nil
				}
				return nil
			}
			start := c.clk.Now()
			n, err := c.cfg.Client.CoreV1().Nodes().Patch(rctx, c.name, types.StrategicMergePatchType, p, metav1.PatchOptions{FieldManager: c.cfg.FieldManager}, "status")
			err = c.observe(ctx, CallPatchStatus, start, err)
			switch {
			case err == nil:
				server, got, res.written = n, n, true
				if level == levelFull {
					res.refused = nil
				} else if res.rejected != nil {
					c.log(ctx).Info("Wrote a reduced status; the provider's full status was rejected", "written", level.String(), "error", res.rejected.Error())
				}
				return nil
			case errors.Is(err, ErrRejected) && !isStop(err):
				res.rejected = err
				refuse(level)
				continue
			case apierrors.IsConflict(err):
				server, fresh, stale = nil, true, true
				return fmt.Errorf("patch node status: stale copy: %w", err)
			case apierrors.IsNotFound(err):
				server, fresh, stale = nil, true, true
				return fmt.Errorf("patch node status: %w", err)
			}
			return fmt.Errorf("patch node status: %w", err)
		}
		// Even the conditions alone were refused: nothing more to try
		// until the provider's status or the ping result changes.
		c.log(ctx).Info("The API server rejected every form of the status; waiting for the next change", "error", res.rejected.Error())
		return nil
	}
	hasUnit := job.limited
	defer func() {
		if hasUnit { // no attempt took the unit over
			c.cfg.Limiter.Release(1)
		}
	}()
	err := c.retry(ctx, "status", func(ctx context.Context) error {
		if l := c.cfg.Limiter; l != nil {
			if hasUnit {
				hasUnit = false
			} else if err := l.Acquire(ctx, 1); err != nil {
				return err // ctx ended
			}
			defer l.Release(1)
		}
		err := attempt(ctx)
		if err != nil && stale && !isPermanent(err) {
			// A stale copy or a vanished Node: read it again at once.
			res.failures++
			err = attempt(ctx)
		}
		if err != nil && !isPermanent(err) {
			res.failures++
		}
		return err
	})
	if err != nil && ctx.Err() == nil {
		res.err = err
	}
	if got != nil {
		res.server = packNode(got, false)
	}
	return res
}

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

// patchFor stamps a copy of d against server and returns the patch (nil
// if nothing needs writing). Any real change is also a status report: its
// heartbeat times are refreshed.
func (c *NodeController) patchFor(d, server *corev1.Node, rec *lastApplied, now time.Time, job statusJob) ([]byte, error) {
	stamped := func(heartbeat bool) ([]byte, error) {
		x := d.DeepCopy()
		stampTimes(x, server, now, heartbeat)
		return statusPatch(c.patchMeta, x, server, rec)
	}
	p, err := stamped(job.heartbeat)
	if err == nil && p != nil && !job.heartbeat && !job.noHeartbeat {
		p, err = stamped(true)
	}
	return p, err
}

// rejectLocal reports a status the controller itself cannot write (its
// record would not fit in an annotation) like a rejection by the server.
// The second result stops Run when the ErrorHandler asks for it.
func (c *NodeController) rejectLocal(ctx context.Context, err error) (error, error) {
	err = fmt.Errorf("%w: %w", ErrRejected, err)
	if h := c.cfg.ErrorHandler; h != nil {
		if herr := h(ctx, err); herr != nil {
			return err, permanent(&stopError{err: herr})
		}
	}
	return err, nil
}

func isPermanent(err error) bool { return backoff.IsPermanent(err) }

func isStop(err error) bool {
	var s *stopError
	return errors.As(err, &s)
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
