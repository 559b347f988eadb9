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
// that never saw it listed cannot tell).
var errDuplicateListed = fmt.Errorf("%w: two owned objects are alike", ErrInconsistent)

// lagging reports whether err is a listing, made at at, that shows a
// child without its parent, or two owned objects alike, while the
// declared lag may explain it: the
// first such answer sets a horizon, and until a listing reaches it the
// pass waits and lists again instead of failing. Any other answer ends
// it. Called with mu held.
func (r *Reconciler) lagging(err error, at listing) bool {
	if !(errors.Is(err, errParentNotListed) || errors.Is(err, errDuplicateListed)) || !r.lagDeclared() {
		r.laggingUntil = nil
		return false
	}
	if r.laggingUntil == nil {
		h := r.horizonAfter(r.clock.Now())
		r.laggingUntil = &h
	}
	return !r.laggingUntil.reachedBy(at)
}

// lagDeclared reports whether the list lag is bounded (configured or
// declared by the engine), so that a listing at an intent's horizon that
// does not show its object proves it was not created.
func (r *Reconciler) lagDeclared() bool { return r.cfg.ListLag > 0 || r.cfg.ListLagListings > 0 }
