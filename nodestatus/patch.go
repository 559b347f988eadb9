package nodestatus

import (
	"encoding/json"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
)

// nodePatchMeta is the strategic-merge schema of a Node; immutable, built
// once per controller.
func nodePatchMeta() (strategicpatch.LookupPatchMeta, error) {
	return strategicpatch.NewPatchMetaFromStruct(&corev1.Node{})
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
