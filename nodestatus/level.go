package nodestatus

import (
	"bytes"
	"maps"

	corev1 "k8s.io/api/core/v1"
)

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
	return [...]string{levelFull: "full", levelStatus: "status only", levelConditions: "conditions only"}[l]
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
