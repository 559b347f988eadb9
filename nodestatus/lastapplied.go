package nodestatus

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// ErrInvalidLastApplied is wrapped by the error for a malformed
// AnnotationLastApplied value. The controller then treats the node as never
// written by it: the next patch upserts its fields and deletes nothing.
var ErrInvalidLastApplied = errors.New("nodestatus: invalid last-applied annotation")

// maxLastApplied is the annotation size limit of the API server (256 KiB for
// all annotations together).
const maxLastApplied = 256 << 10

const lastAppliedVersion = 1

// errRecordTooLarge is wrapped when what the controller would write does not
// fit in the annotation: the status is then written without the provider's
// labels and annotations, like a status the API server rejected.
var errRecordTooLarge = errors.New("nodestatus: last-applied record above the annotation size limit")

// lastApplied is what the controller last wrote: the "original" of the
// three-way patch. Heartbeat times are left out so that the annotation only
// changes when something else does.
type lastApplied struct {
	Version     int               `json:"v"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
	Status      corev1.NodeStatus `json:"status"`
}

// newLastApplied records n's labels, annotations (without the controller's
// own) and status, without heartbeat times.
func newLastApplied(n *corev1.Node) *lastApplied {
	la := &lastApplied{Version: lastAppliedVersion, Labels: n.Labels}
	for k, v := range n.Annotations {
		if k == AnnotationLastApplied {
			continue
		}
		if la.Annotations == nil {
			la.Annotations = make(map[string]string, len(n.Annotations))
		}
		la.Annotations[k] = v
	}
	n.Status.DeepCopyInto(&la.Status)
	for i := range la.Status.Conditions {
		la.Status.Conditions[i].LastHeartbeatTime = metav1.Time{}
	}
	return la
}

func (la *lastApplied) encode() (string, error) {
	b, err := json.Marshal(la)
	if err != nil {
		return "", fmt.Errorf("nodestatus: encode last-applied: %w", err)
	}
	if len(b) > maxLastApplied {
		return "", fmt.Errorf("%w: %d bytes, limit %d", errRecordTooLarge, len(b), maxLastApplied)
	}
	return string(b), nil
}

// node returns the record as the "original" Node of a three-way patch.
func (la *lastApplied) node() *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Labels: la.Labels, Annotations: la.Annotations}}
	la.Status.DeepCopyInto(&n.Status)
	return n
}

// decodeLastApplied parses and validates an AnnotationLastApplied value.
func decodeLastApplied(s string) (*lastApplied, error) {
	if len(s) > maxLastApplied {
		return nil, fmt.Errorf("%w: %d bytes, above the %d-byte limit", ErrInvalidLastApplied, len(s), maxLastApplied)
	}
	dec := json.NewDecoder(bytes.NewReader([]byte(s)))
	dec.DisallowUnknownFields()
	var la lastApplied
	if err := dec.Decode(&la); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidLastApplied, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: trailing data", ErrInvalidLastApplied)
	}
	if la.Version != lastAppliedVersion {
		return nil, fmt.Errorf("%w: version %d, want %d", ErrInvalidLastApplied, la.Version, lastAppliedVersion)
	}
	for k, v := range la.Labels {
		if msgs := validation.IsQualifiedName(k); len(msgs) > 0 {
			return nil, fmt.Errorf("%w: label key %q: %v", ErrInvalidLastApplied, k, msgs)
		}
		if msgs := validation.IsValidLabelValue(v); len(msgs) > 0 {
			return nil, fmt.Errorf("%w: label %q value %q: %v", ErrInvalidLastApplied, k, v, msgs)
		}
	}
	for k := range la.Annotations {
		if msgs := validation.IsQualifiedName(k); len(msgs) > 0 {
			return nil, fmt.Errorf("%w: annotation key %q: %v", ErrInvalidLastApplied, k, msgs)
		}
		if k == AnnotationLastApplied {
			return nil, fmt.Errorf("%w: records itself", ErrInvalidLastApplied)
		}
	}
	seen := make(map[corev1.NodeConditionType]bool, len(la.Status.Conditions))
	for _, c := range la.Status.Conditions {
		if c.Type == "" {
			return nil, fmt.Errorf("%w: condition without type", ErrInvalidLastApplied)
		}
		if seen[c.Type] {
			return nil, fmt.Errorf("%w: condition %q twice", ErrInvalidLastApplied, c.Type)
		}
		seen[c.Type] = true
		if !c.LastHeartbeatTime.IsZero() {
			return nil, fmt.Errorf("%w: condition %q has a heartbeat time", ErrInvalidLastApplied, c.Type)
		}
	}
	seenAddr := make(map[corev1.NodeAddress]bool, len(la.Status.Addresses))
	for _, a := range la.Status.Addresses {
		if a.Type == "" {
			return nil, fmt.Errorf("%w: address without type", ErrInvalidLastApplied)
		}
		if seenAddr[a] {
			return nil, fmt.Errorf("%w: address %s %q twice", ErrInvalidLastApplied, a.Type, a.Address)
		}
		seenAddr[a] = true
	}
	return &la, nil
}
