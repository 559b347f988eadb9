package nodestatus

import (
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// A controller keeps three API objects between uses: the provider's newest
// node, the served Node and the Lease. Each is kept in its protobuf
// encoding, one allocation of a few hundred bytes to a few KiB, rather than
// decoded, which costs hundreds of small allocations and, kept across the
// garbage of the requests that produced them, heap fragmentation. Each use
// decodes a fresh copy, which its user then owns.

// packedNode is a Node kept encoded.
type packedNode struct {
	uid types.UID
	raw []byte
	// node is set instead of raw only if the Node could not be encoded,
	// which a Node built by the Go types cannot cause.
	node *corev1.Node
}

// packNode keeps what a controller uses of n: name, UID, resourceVersion,
// labels, annotations, spec and status; not managed fields or owner
// references. With spec false, the spec is left out too (the served Node's
// spec is never used: writes go to the status subresource).
func packNode(n *corev1.Node, spec bool) *packedNode {
	slim := corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: n.Name, UID: n.UID, ResourceVersion: n.ResourceVersion,
			Labels: n.Labels, Annotations: n.Annotations,
		},
		Status: n.Status,
	}
	if spec {
		slim.Spec = n.Spec
	}
	raw, err := slim.Marshal()
	if err != nil {
		return &packedNode{uid: n.UID, node: slim.DeepCopy()}
	}
	return &packedNode{uid: n.UID, raw: raw}
}

// unpack returns a new copy of the node, or nil if it cannot be decoded.
func (p *packedNode) unpack() *corev1.Node {
	if p == nil {
		return nil
	}
	if p.node != nil {
		return p.node.DeepCopy()
	}
	n := &corev1.Node{}
	if err := n.Unmarshal(p.raw); err != nil {
		return nil
	}
	return n
}

// packLease encodes l without its managed fields (an update without them
// leaves the server's as they are) into buf, reusing its storage when it is
// large enough: a lease renewed every few seconds then allocates nothing
// that outlives the renewal. It returns nil if l cannot be encoded; the next
// renewal then reads the lease first.
func packLease(buf []byte, l *coordinationv1.Lease) []byte {
	mf := l.ManagedFields
	l.ManagedFields = nil
	defer func() { l.ManagedFields = mf }()
	n := l.Size()
	if cap(buf) < n {
		buf = make([]byte, n, n+n/8) // room for a longer resourceVersion
	}
	buf = buf[:n]
	if _, err := l.MarshalToSizedBuffer(buf); err != nil {
		return nil
	}
	return buf
}

// unpackLease decodes a lease kept by packLease; nil when there is none.
func unpackLease(raw []byte) *coordinationv1.Lease {
	if raw == nil {
		return nil
	}
	l := &coordinationv1.Lease{}
	if err := l.Unmarshal(raw); err != nil {
		return nil
	}
	return l
}
