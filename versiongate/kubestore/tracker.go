package kubestore

import (
	"bytes"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// tracker is what a Store knows of a set of Leases from its listings and
// watch events: for each, the object (UID), the value and the revision at
// which that value was set, and when this process first saw its current
// resourceVersion. For the records (Store.seen) it serves WriteStatus'
// validation (a record listed after the write must be one this store had
// reported, unchanged since the write's nodesRev) and the reaper (which
// records name which liveness object); for the liveness objects
// (Store.live), expiry (one unchanged for its TTL plus the margin on this
// process's clock is dead). The Store's mu guards it.
type tracker struct {
	recs map[string]*seenRecord
	// covered is the revision up to which the tracker has applied every
	// change: the newest listing's or watch event's.
	covered int64
}

type seenRecord struct {
	uid   types.UID
	value []byte
	// ref is a record's AnnotationHeartbeat: the liveness object it names.
	ref string
	// valueRev is the revision at which the record was created or its
	// value last changed, as far as this store can tell: exact from a
	// watch event, and from a listing the record's resourceVersion (an
	// upper bound) unless the tracker already knew this object with this
	// value. A keep-alive does not change it.
	valueRev int64
	// rv is the newest resourceVersion seen; at is when this process
	// first saw it, on the store's clock; ttl is the record's TTL.
	rv  int64
	at  time.Time
	ttl time.Duration
	// deleted is set when the record was seen deleted (or deleted here).
	deleted bool
}

func newTracker() tracker { return tracker{recs: map[string]*seenRecord{}} }

// observe applies a record seen at resourceVersion rv with the given
// object UID and value (nil: deleted). It reports whether the record
// changed for the gate: created, deleted, or its value changed; a renewal
// is no change. A sighting older than what the tracker holds (a watch
// behind a listing) changes nothing, except that one showing another
// object or value than the tracker's proves the tracker's value set after
// it: at e.rv at the latest, so that a status conditioned on a revision in
// between, where the value differed, is not validated against it.
func (t *tracker) observe(id string, uid types.UID, value []byte, ref string, rv int64, ttl time.Duration, now time.Time) bool {
	e := t.recs[id]
	if e != nil && rv <= e.rv {
		if value != nil && !e.deleted && (e.uid != uid || !bytes.Equal(e.value, value)) {
			e.valueRev = max(e.valueRev, e.rv)
		}
		return false
	}
	if value == nil {
		if e == nil || e.deleted {
			if e != nil {
				e.rv = rv
			}
			return false
		}
		e.deleted, e.value, e.rv, e.at = true, nil, rv, now
		return true
	}
	if e == nil || e.deleted || e.uid != uid {
		t.recs[id] = &seenRecord{uid: uid, value: value, ref: ref, valueRev: rv, rv: rv, at: now, ttl: ttl}
		return true
	}
	changed := !bytes.Equal(e.value, value)
	if changed {
		e.value, e.valueRev = value, rv
	}
	e.rv, e.at, e.ttl = rv, now, ttl
	return changed
}

// changedAt reports whether the record's version at revision rv (object
// uid, value; not deleted) may differ for the gate from the version before
// it, judged by what the tracker holds, which a listing may have brought
// past rv: false only when the tracker knows this object with this value
// set before rv (exactly, or from a listing as an upper bound). When a
// listing has seen the record changed or deleted after rv, it cannot tell,
// and answers true: a record may be reported again unchanged, a change is
// never missed. A watch asks it for a record its own events have not
// shown yet.
func (t *tracker) changedAt(id string, uid types.UID, value []byte, rv int64) bool {
	e := t.recs[id]
	if e == nil || e.deleted || e.uid != uid || !bytes.Equal(e.value, value) {
		return true
	}
	return e.valueRev >= rv
}

// listed applies a listing at revision rev: present holds the records
// listed (already observed); every other record the tracker holds as
// live at a revision below rev was deleted by then.
func (t *tracker) listed(present map[string]bool, rev int64, now time.Time) {
	for id, e := range t.recs {
		if !present[id] && !e.deleted && e.rv < rev {
			e.deleted, e.value, e.rv, e.at = true, nil, rev, now
		}
	}
	t.covered = max(t.covered, rev)
}

// dead reports whether e is unchanged for its TTL plus the margin since
// this process first saw its current resourceVersion.
func (e *seenRecord) dead(now time.Time) bool {
	return !e.deleted && now.Sub(e.at) >= e.ttl+recordMargin(e.ttl)
}

// check is WriteStatus' validation of one record listed after the write:
// it must be an object the tracker knows, with the value it knows, set at
// or before nodesRev. It returns why not, or "".
func (t *tracker) check(id string, uid types.UID, value []byte, nodesRev int64) string {
	e := t.recs[id]
	switch {
	case e == nil || e.deleted || e.uid != uid:
		return fmt.Sprintf("record %q (uid %s) was not in the listings this leader acted on", id, uid)
	case !bytes.Equal(e.value, value):
		return fmt.Sprintf("record %q has a value the leader has not seen", id)
	case e.valueRev > nodesRev:
		return fmt.Sprintf("record %q changed at revision %d, after %d", id, e.valueRev, nodesRev)
	}
	return ""
}
