package lbrecon

import (
	"errors"
	"fmt"
	"time"
)

// Confirmation: the horizon of a call, the first listing that must
// reflect it given the declared lag, and the answers a lag may explain.
// Tests: listinglag_test.go, replica_test.go.

// horizon is the first listing that reflects a call: one started at or
// after at (ListLag after the call returned), or whose number is n or more
// (the ListLagListings+1-th started after the call returned; with no lag
// declared in either unit, the first). The zero horizon is reached by no
// listing: the call has not returned.
type horizon struct {
	at time.Time
	n  uint64
}

// reachedBy reports whether listing l is at or past h.
func (h horizon) reachedBy(l listing) bool {
	return (!h.at.IsZero() && !l.at.Before(h.at)) || (h.n > 0 && l.n >= h.n)
}

// listing identifies one List call: when it started, and its number
// among this reconciler's List calls (counted from 1 as they start).
type listing struct {
	at time.Time
	n  uint64
}

// horizonAfter returns the horizon of a call returning now: ListLag after
// it, the ListLagListings+1-th listing started after it, whichever comes
// first; with neither declared, the first listing started after it.
func (r *Reconciler) horizonAfter(now time.Time) horizon {
	var h horizon
	if r.cfg.ListLag > 0 {
		h.at = now.Add(r.cfg.ListLag)
	}
	if k := r.cfg.ListLagListings; k > 0 {
		h.n = r.listings.Load() + uint64(k) + 1
	} else if r.cfg.ListLag == 0 {
		h.n = r.listings.Load() + 1
	}
	return h
}

// horizonFrom returns the horizon of a listing l: the first listing
// that reflects every change made before l started.
func (r *Reconciler) horizonFrom(l listing) horizon {
	var h horizon
	if r.cfg.ListLag > 0 {
		h.at = l.at.Add(r.cfg.ListLag)
	}
	if k := r.cfg.ListLagListings; k > 0 {
		h.n = l.n + uint64(k) + 1
	}
	return h
}

// errParentNotListed is the inconsistent answer of a listing that shows
// an object without its parent: on read replicas, within the lag, a new
// child may show before its parent.
var errParentNotListed = fmt.Errorf("%w: a parent is not listed", ErrInconsistent)

// errDuplicateListed is the inconsistent answer of a listing that shows
// two owned objects with one name and one spec: on read replicas, within
// the lag, one of them may be an object someone else deleted (a process
// that never saw it listed cannot tell). Past the lag horizon, both
// listed when it was set and again at a listing past it exist: the plan
// keeps one and destroys the others (see Reconciler.duplicates).
var errDuplicateListed = fmt.Errorf("%w: two owned objects are alike", ErrInconsistent)

// lagging reports whether err is a listing, made at at, that shows a
// child without its parent, or two owned objects alike, while the
// declared lag may explain it: the
// first such answer sets a horizon, and until a listing reaches it the
// pass waits and lists again instead of failing. Any other answer ends
// it. A child without its parent that was listed when the horizon was set
// is, at a listing past it, an orphan (see orphans), and objects alike
// that were all listed then are duplicates (see Reconciler.duplicates);
// one that still fails the pass there was not listed then: the pass
// fails, and a new horizon
// starts from this listing for the next call. Called with mu held.
func (r *Reconciler) lagging(err error, at listing) bool {
	if !(errors.Is(err, errParentNotListed) || errors.Is(err, errDuplicateListed)) || !r.lagDeclared() {
		r.laggingUntil = nil
		return false
	}
	if r.laggingUntil != nil && r.laggingUntil.reachedBy(at) {
		r.watchOrphans(at) // for the next call
		return false
	}
	if r.laggingUntil == nil {
		r.watchOrphans(at)
	}
	return !r.laggingUntil.reachedBy(at)
}

// watchOrphans sets a new horizon from now and, if the listing at is the
// last merged, remembers its objects as the orphans to be. Called with mu
// held.
func (r *Reconciler) watchOrphans(at listing) {
	h := r.horizonAfter(r.clock.Now())
	r.laggingUntil = &h
	if l := r.lastListed.Load(); l != nil && l.at.n == at.n {
		r.orphanWatch.Store(&orphanWatch{until: h, keys: l.keys})
	}
}

// settled reports whether k was listed by the listing that set the lag
// horizon, and the listing of v is past it: a child of it lacking its
// parent is an orphan, and duplicates of it that were listed then too
// exist (the declared lag no longer explains either answer).
func (v *view) settled(k Key) bool { return v.orphans[k] }

// orphanWatch is what a listing that showed a child without its parent
// leaves: its horizon, and the objects that listing showed. It stays
// until a new one replaces it: a parent deleted is never listed again.
type orphanWatch struct {
	until horizon
	keys  map[Key]bool
}

// listedKeys are the keys of the objects of one listing.
type listedKeys struct {
	at   listing
	keys map[Key]bool
}

// orphans returns the objects of the listing at that are orphans: those
// listed when a listing without their parent set the horizon, once at
// reaches it. A parent missing then and at a listing that reflects every
// change made before it was deleted: the child was made before it was
// listed, and its parent before the child, so the declared lag can no
// longer explain the parent's absence. Nil without a declared lag (an
// unbounded lag explains any absence).
func (r *Reconciler) orphans(at listing) map[Key]bool {
	w := r.orphanWatch.Load()
	if w == nil || !r.lagDeclared() || !w.until.reachedBy(at) {
		return nil
	}
	return w.keys
}

// rememberListing records the keys of the listing at, for the horizon a child
// without its parent in it may set.
func (r *Reconciler) rememberListing(at listing, keys map[Key]bool) {
	r.lastListed.Store(&listedKeys{at: at, keys: keys})
}

// lagDeclared reports whether the list lag is bounded (configured or
// declared by the engine), so that a listing at an intent's horizon that
// does not show its object proves it was not created.
func (r *Reconciler) lagDeclared() bool { return r.cfg.ListLag > 0 || r.cfg.ListLagListings > 0 }
