package nodestatus

import (
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// leaseRenewal is the last successful renewal of the node's lease.
type leaseRenewal struct {
	sent time.Time
	uid  types.UID
}

// LeaseRenewal reports the last successful renewal of node's Lease: when
// the write that renewed (or created) it was sent, on the controller's
// clock (Config.Clock; the server applied it no earlier), and the UID of
// the Lease object it renewed. ok is false before the first renewal, and
// for a node other than this controller's. It sends no request and is
// safe for concurrent use.
//
// It is what a process that keeps its own liveness on the node's Lease
// (versiongate/kubestore's node-Lease records) counts on: a deadline from
// the send time is never later than one an observer of the Lease counts
// from when it saw the renewal. Its signature is kubestore's
// Config.NodeLease.Heartbeat, so a host wires the method as it is.
func (c *NodeController) LeaseRenewal(node string) (sentAt time.Time, lease types.UID, ok bool) {
	r := c.renewal.Load()
	if r == nil || node != c.name {
		return time.Time{}, "", false
	}
	return r.sent, r.uid, true
}
