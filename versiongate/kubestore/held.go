package kubestore

import (
	"context"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/reconkit/reconkit/versiongate"
)

// heldDeath is a record seen deleted while the heartbeat it named may
// still be renewed: someone other than the reaper deleted it (an operator,
// a script), and its node may serve until its next keep-alive learns of
// the loss. The store reports the deletion only once the heartbeat is
// gone or judged dead by the reaper's rule, and meanwhile keeps the record
// in its listings, so the gate counts the node as a member.
type heldDeath struct {
	uid   types.UID
	rec   versiongate.Record // as the gate last had it
	rev   int64              // the deletion's revision
	hb    string             // the heartbeat's name
	hbUID types.UID          // and UID, as the record named it
	ttl   time.Duration      // the record's
	rv    string             // the heartbeat's resourceVersion last read
	since time.Time          // when rv was first read
	next  time.Time          // when to read the heartbeat again
}

// holdDeath decides, with one read of the heartbeat the deleted record l
// (deleted at revision rev) named, whether its deletion is proof of its node's death. It returns
// true, and keeps the record as held, while the heartbeat is there. With
// records kept alive by node Leases, which the store does not write, it
// holds nothing. s.mu is not held.
func (s *Store) holdDeath(ctx context.Context, id string, l *coordinationv1.Lease, rec versiongate.Record, rev int64) bool {
	if s.node != nil {
		return false
	}
	ns, name, uid, ok := parseRef(l.Annotations[AnnotationHeartbeat])
	if !ok || ns != s.ns {
		return false
	}
	now := s.clock.Now()
	h := &heldDeath{uid: l.UID, rec: rec, rev: rev, hb: name, hbUID: uid, ttl: leaseTTL(l), since: now}
	if s.heartbeatDead(ctx, h, now) {
		return false
	}
	s.mu.Lock()
	s.held[id] = h
	s.mu.Unlock()
	return true
}

// heartbeatDead reads h's heartbeat (GET, linearizable) and reports
// whether its node can no longer be serving: the heartbeat is gone (the
// reaper's deletion, or the node's keep-alive that learned of the loss),
// another object, or unchanged for its TTL plus the margin since h first
// read that resourceVersion. Otherwise it sets when to read it again: a
// keep-alive period (a third of the TTL) later, or when it would be
// judged dead if sooner. A failed read is retried likewise.
func (s *Store) heartbeatDead(ctx context.Context, h *heldDeath, now time.Time) bool {
	cur, err := s.leases.Get(ctx, h.hb, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err) && !apiMissing(err):
		return true
	case err == nil && cur.UID != h.hbUID:
		return true
	case err == nil && cur.ResourceVersion != h.rv:
		h.rv, h.since = cur.ResourceVersion, now
	case err == nil && now.Sub(h.since) >= h.ttl+recordMargin(h.ttl):
		return true
	}
	h.next = now.Add(min(h.ttl/3, max(h.since.Add(h.ttl+recordMargin(h.ttl)).Sub(now), time.Second)))
	return false
}

// checkHeld reads again the heartbeats of the held deletions at or before
// revision upTo that are due, and returns the records whose deletion is
// now proven. A watch that has delivered every change up to upTo reports
// them at upTo: a held deletion is never reported ahead of changes the
// watch has still to deliver.
func (s *Store) checkHeld(ctx context.Context, upTo int64) []versiongate.Record {
	now := s.clock.Now()
	s.mu.Lock()
	due := map[string]*heldDeath{}
	for id, h := range s.held {
		if h.rev <= upTo && !now.Before(h.next) {
			due[id] = h
		}
	}
	s.mu.Unlock()
	var out []versiongate.Record
	for id, h := range due {
		if ctx.Err() != nil {
			return out
		}
		if !s.heartbeatDead(ctx, h, now) {
			continue
		}
		s.mu.Lock()
		if s.held[id] == h {
			delete(s.held, id)
			out = append(out, versiongate.Record{ID: id})
		}
		s.mu.Unlock()
	}
	return out
}

// heldRecords returns the held records, as a listing reports them. s.mu
// is held.
func (s *Store) heldRecords(listed map[string]bool) []versiongate.Record {
	var out []versiongate.Record
	for id, h := range s.held {
		if !listed[id] {
			out = append(out, h.rec)
		}
	}
	return out
}
