package lbrecon

import (
	"errors"
	"fmt"
	"time"
)

// nameKey identifies an object by kind and name, as steps do.
type nameKey struct{ kind, name string }

func nameOf(o Object) nameKey { return nameKey{o.Kind, o.Name} }

// The memory's vocabulary (see doc.go, "Words"): an intent is a creation
// whose outcome is not known yet, by name; an ack is a change the engine
// acknowledged (created, adopted, updated, repaired), by key; a deletion
// is an object the engine was asked to destroy, by key. Each is kept
// until it settles: until a listing at or past its horizon agrees with
// it (or ConfirmTimeout passes), since listings before the horizon may go
// backwards (read replicas) and miss what an earlier one showed.

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

// intent is a creation whose outcome is unknown: its call is in flight, or
// failed in a way that may have created the object. It holds its name
// until a listing shows the object, a listing at its horizon does not
// (only with a declared lag), or ConfirmTimeout passes.
type intent struct {
	obj Object    // as desired; Spec is nil for an intent loaded from the journal
	at  time.Time // when the call was made
	fp  string    // the spec's fingerprint
	// token is the idempotency token sent with the creation.
	token string
	// horizon is set when the call returned (zero while it is in flight).
	horizon horizon
}

// ack is a change the engine acknowledged: obj is what it wrote. It is
// unconfirmed until a listing shows it, then seen; it settles (and is
// forgotten) when a listing at its horizon shows it, or when a listing at
// its horizon disagrees with a seen ack (that listing is the truth).
type ack struct {
	obj     Object    // the object as the engine returned it; State is the last one listed once seen
	at      time.Time // when the call was made
	horizon horizon   // the first listing that reflects the call
	seen    bool      // a listing showed it
	final   bool      // a listing showed it ok or failed (its settling time is learnt)
}

// deletion is an object the engine was asked to destroy. It is deleting
// while listings still show it; gone once one does not (a later listing
// that shows it again before its horizon lags, and is not believed); it
// settles when a listing at its horizon, counted from when it was first
// seen gone, does not show it.
type deletion struct {
	at      time.Time // when the call was made
	gone    bool
	horizon horizon // set when first seen gone
}

// listing identifies one List call: when it started, and its number
// among this reconciler's List calls (counted from 1 as they start).
type listing struct {
	at time.Time
	n  uint64
}

// memory is what the reconciler keeps between passes and calls, so that a
// listing that lags behind its writes cannot mislead it.
type memory struct {
	// intents holds creations of unknown outcome by name: the name is not
	// created again while the intent is held.
	intents map[nameKey]*intent
	// acks holds acknowledged changes until they settle: the plan is made
	// from them, not from a listing that lacks them.
	acks map[Key]*ack
	// deletions holds destroyed objects until they settle: they are being
	// deleted, not to be destroyed again, and once gone not to be believed
	// back.
	deletions map[Key]*deletion
	// failures counts repairs and recreations per name.
	failures map[nameKey]int
	// pendingSince is when an object was first seen pending.
	pendingSince map[Key]time.Time
	// noRepair and noUpdate hold objects the engine cannot repair or update
	// in place (it answered ErrNotSupported).
	noRepair map[Key]bool
	noUpdate map[Key]bool
	// status holds the last Status a listing showed per object, so that a
	// lagging listing from before the provider assigned it (a read
	// replica) does not take it away.
	status map[Key]any
	// firstSeen is the first listing that showed an owned object (with a
	// declared lag): missing from a listing at that listing's horizon, it
	// was deleted by someone else.
	firstSeen map[Key]listing
	// waitSince is when a step first waited for an object ([Changes.Wait]).
	waitSince map[Key]time.Time
	// journal holds the entries recorded in Config.Journal, until neither
	// an intent nor an ack of their name is left (or ConfirmTimeout
	// passes); forget holds those to remove from it at the next occasion.
	journal map[nameKey]*journaled
	forget  []Intent
	// conflicts holds names whose creation the engine refused because the
	// name is taken: the old object of that name is destroyed first.
	conflicts map[nameKey]bool
	// settleWrite and settleDestroy are the last observed times from a
	// write to a listing that shows it done (listed and out of pending, or
	// no longer listed): the provider's pending period and list lag, learnt,
	// so that waits do not poll before a listing can tell anything new.
	// They are capped at MaxPollInterval.
	settleWrite, settleDestroy time.Duration
}

func newMemory() memory {
	return memory{
		intents:      make(map[nameKey]*intent),
		acks:         make(map[Key]*ack),
		deletions:    make(map[Key]*deletion),
		failures:     make(map[nameKey]int),
		pendingSince: make(map[Key]time.Time),
		noRepair:     make(map[Key]bool),
		noUpdate:     make(map[Key]bool),
		status:       make(map[Key]any),
		waitSince:    make(map[Key]time.Time),
		firstSeen:    make(map[Key]listing),
		conflicts:    make(map[nameKey]bool),
		journal:      make(map[nameKey]*journaled),
	}
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

// view is a listing merged with the memory.
type view struct {
	owned    []Object // owned objects: listed, plus written and not yet listed; minus those being deleted
	untagged []Object // objects without a tag of the owner key: adoption candidates only
	deleting []Object // owned objects destroyed and still listed
	listed   map[Key]bool
	held     map[nameKey]bool // names with a creation of unknown outcome
	written  []Object         // writes not yet confirmed
	now      time.Time
}

func (v *view) observation() *Observation {
	obs := NewObservation(v.owned)
	for k := range v.listed {
		obs.known[k] = true
	}
	return obs
}

// merge folds a listing into the memory and returns the view to plan
// from. Called with memMu held.
func (r *Reconciler) merge(listed []Object, listedAt listing) (*view, error) {
	now := r.clock.Now()
	m := &r.mem
	v := &view{listed: make(map[Key]bool, len(listed)), held: make(map[nameKey]bool), now: now}
	byKey := make(map[Key]Object, len(listed))
	for _, o := range listed {
		if _, ok := r.stepOf[o.Kind]; !ok {
			continue
		}
		if o.ID == "" {
			return nil, fmt.Errorf("%w: listed %v has no ID", ErrInconsistent, o)
		}
		if _, dup := byKey[o.Key()]; dup {
			return nil, fmt.Errorf("%w: %v listed twice", ErrInconsistent, o.Key())
		}
		byKey[o.Key()] = o
		v.listed[o.Key()] = true
	}
	// Objects deleted by someone else: an owned object a listing showed,
	// missing from one the lag after, is gone; a lagging listing that
	// shows it again is not believed (see deletions).
	if r.lagDeclared() {
		for k, first := range m.firstSeen {
			if _, listed := byKey[k]; listed {
				continue
			}
			if m.deletions[k] == nil && r.horizonFrom(first).reachedBy(listedAt) {
				m.deletions[k] = &deletion{at: now, gone: true, horizon: r.horizonAfter(now)}
			}
			if m.deletions[k] != nil {
				delete(m.firstSeen, k)
			}
		}
		for k, o := range byKey {
			if _, ok := m.firstSeen[k]; !ok && m.deletions[k] == nil && r.owns(o) {
				m.firstSeen[k] = listedAt
			}
		}
	}
	// Deletions: gone at the first listing that does not show the object
	// (a later one showing it again lags: it is not believed), settled at
	// the first listing past the horizon that does not show it; one still
	// listed after ConfirmTimeout, never seen gone, is destroyed again.
	for k, d := range m.deletions {
		_, listed := byKey[k]
		switch {
		case !listed && d.gone && d.horizon.reachedBy(listedAt):
			delete(m.deletions, k)
		case !listed && !d.gone:
			m.settleDestroy = min(now.Sub(d.at), r.cfg.MaxPollInterval)
			d.gone, d.horizon = true, r.horizonAfter(now)
		case listed && d.gone && d.horizon.reachedBy(listedAt):
			// A listing past the horizon shows it: it is there.
			d.gone, d.at = false, now
		case listed && !d.gone && now.Sub(d.at) >= r.cfg.ConfirmTimeout:
			delete(m.deletions, k)
		}
	}
	// Intents whose object a listing shows end; an owned one whose call
	// returned becomes a seen ack, kept until a listing past the horizon
	// settles it, so that a listing lagging again does not make the name
	// free.
	shown := func(in *intent) (Object, bool) {
		for _, o := range listed {
			if in.matches(o) && (r.owns(o) || !r.tagged(o)) {
				return o, true
			}
		}
		return Object{}, false
	}
	for nk, in := range m.intents {
		o, ok := shown(in)
		switch {
		case ok && in.horizon == (horizon{}):
			// In flight (a Check's listing during the call): its answer
			// decides; the listing shows the object meanwhile.
		case ok:
			delete(m.intents, nk) // the journal's entry goes with the ack
			if _, acked := m.acks[o.Key()]; !acked && r.owns(o) && m.deletions[o.Key()] == nil {
				m.acks[o.Key()] = &ack{obj: o.clone(), at: in.at, horizon: in.horizon}
			}
		case now.Sub(in.at) >= r.cfg.ConfirmTimeout, r.lagDeclared() && in.horizon.reachedBy(listedAt):
			// Not created (a listing made after the list lag, in time or
			// in listings, does not show it), or given up on.
			delete(m.intents, nk)
			m.dropJournal(nk)
		default:
			v.held[nk] = true
		}
	}
	// Acks: seen at the first listing that shows them, settled at the
	// first listing past the horizon that shows them, or that contradicts
	// a seen one; an ack never seen is given up after ConfirmTimeout.
	for k, a := range m.acks {
		o, listed := byKey[k]
		shows := listed && r.owns(o) && SameSpec(o.Spec, a.obj.Spec)
		past := a.horizon.reachedBy(listedAt)
		if shows {
			a.seen = true
			a.obj.State = o.State
			if !a.final && (o.State == StateOK || o.State == StateFailed) {
				a.final = true
				m.settleWrite = min(now.Sub(a.at), r.cfg.MaxPollInterval)
			}
		}
		switch {
		case past && (shows || a.seen):
			delete(m.acks, k)
		case !a.seen && now.Sub(a.at) >= r.cfg.ConfirmTimeout:
			delete(m.acks, k)
		case !a.seen:
			v.written = append(v.written, a.obj)
		}
	}
	// A journal entry goes once no intent or ack of its name is left.
	named := make(map[nameKey]bool, len(m.acks))
	for _, a := range m.acks {
		named[nameOf(a.obj)] = true
	}
	for nk, j := range m.journal {
		if _, held := m.intents[nk]; (!held && !named[nk]) || now.Sub(j.At) >= r.cfg.ConfirmTimeout {
			m.dropJournal(nk)
		}
	}
	seen := make(map[Key]bool, len(byKey))
	inOwned := make(map[Key]bool, len(byKey))
	for _, o := range listed {
		k := o.Key()
		if _, ok := r.stepOf[o.Kind]; !ok || seen[k] {
			continue
		}
		seen[k] = true
		d, a := m.deletions[k], m.acks[k]
		switch {
		case d != nil && d.gone:
			// Gone, listed again by a lagging listing.
		case d != nil:
			if r.owns(o) {
				v.deleting = append(v.deleting, o)
			}
		case a != nil:
			// The listing may lag behind the ack: plan from the ack,
			// with the state the provider reports.
			o = a.obj.clone()
			o.State, o.Status = byKey[k].State, byKey[k].Status
			v.owned = append(v.owned, o)
			inOwned[k] = true
		case !r.tagged(o):
			v.untagged = append(v.untagged, o)
		case !r.owns(o):
		default:
			v.owned = append(v.owned, o)
			inOwned[k] = true
		}
	}
	for k, a := range m.acks {
		if !inOwned[k] && m.deletions[k] == nil {
			v.owned = append(v.owned, a.obj.clone())
		}
	}
	// Pending times, failure counts and assigned attributes.
	inView := make(map[Key]bool, len(v.owned))
	for i, o := range v.owned {
		inView[o.Key()] = true
		switch st, ok := m.status[o.Key()]; {
		case o.Status != nil:
			m.status[o.Key()] = o.Status
		case ok:
			v.owned[i].Status = st // a lagging listing from before the provider assigned it
		}
		switch o.State {
		case StateOK:
			delete(m.pendingSince, o.Key())
			delete(m.failures, nameOf(o))
		case StateFailed:
			delete(m.pendingSince, o.Key())
		default:
			if _, ok := m.pendingSince[o.Key()]; !ok {
				m.pendingSince[o.Key()] = now
			}
		}
	}
	for k := range m.pendingSince {
		if !inView[k] {
			delete(m.pendingSince, k)
		}
	}
	for k := range m.status {
		if !inView[k] {
			delete(m.status, k)
		}
	}
	for k := range m.waitSince {
		if o, ok := findOwned(v.owned, k); !ok || o.Status != nil {
			delete(m.waitSince, k)
		}
	}
	for k := range m.noRepair {
		if !inView[k] {
			delete(m.noRepair, k)
		}
	}
	for k := range m.noUpdate {
		if !inView[k] {
			delete(m.noUpdate, k)
		}
	}
	return v, nil
}

// dropJournal removes the journal's intent for nk, if any, and queues its
// removal from the journal. Called with memMu held.
func (m *memory) dropJournal(nk nameKey) {
	if j, ok := m.journal[nk]; ok {
		delete(m.journal, nk)
		m.forget = append(m.forget, j.Intent)
	}
}

// owns reports whether o carries the ownership tag.
func (r *Reconciler) owns(o Object) bool { return o.HasTag(r.cfg.Tag) }

// tagged reports whether o carries any value of the ownership tag's key.
func (r *Reconciler) tagged(o Object) bool {
	for _, t := range o.Tags {
		if tagKey(t) == r.tagKey {
			return true
		}
	}
	return false
}

// settled returns when the outstanding writes can be expected to show in a
// listing, from what earlier writes took; zero when nothing is outstanding.
// Before any write was seen through, a creation's horizon (the declared
// ListLag after its call returned) is the guess: with a lag declared in
// time, no listing before it need show the creation. Called with memMu
// held.
func (m *memory) settled() time.Time {
	var t time.Time
	expect := func(at time.Time, h horizon) time.Time {
		if m.settleWrite == 0 {
			return h.at // zero without a declared lag, or in flight
		}
		return at.Add(m.settleWrite)
	}
	for _, a := range m.acks {
		if e := expect(a.at, a.horizon); !a.seen && e.After(t) {
			t = e
		}
	}
	for _, in := range m.intents {
		if e := expect(in.at, in.horizon); in.horizon != (horizon{}) && e.After(t) {
			t = e
		}
	}
	// Before any deletion was seen through, the list lag learnt from
	// writes is the best guess.
	destroy := m.settleDestroy
	if destroy == 0 {
		destroy = m.settleWrite
	}
	for _, d := range m.deletions {
		if e := d.at.Add(destroy); !d.gone && e.After(t) {
			t = e
		}
	}
	return t
}

// newestWrite returns when the most recent write no listing has confirmed
// yet was made, leaving out, when the lag is counted in listings
// (byCount), the acks and intents that the listings made so far
// (listings) cannot show yet: more listings, not more time, show them, so
// they are no reason to space the polls out. Called with memMu held.
func (m *memory) newestWrite(listings uint64, byCount bool) (time.Time, bool) {
	var t time.Time
	early := func(h horizon) bool { return byCount && h.n > listings }
	for _, a := range m.acks {
		if !a.seen && !early(a.horizon) {
			t = later(t, a.at)
		}
	}
	for _, in := range m.intents {
		if !early(in.horizon) {
			t = later(t, in.at)
		}
	}
	for _, d := range m.deletions {
		if !d.gone {
			t = later(t, d.at)
		}
	}
	return t, !t.IsZero()
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// findOwned returns the object with key k among objs.
func findOwned(objs []Object, k Key) (Object, bool) {
	for _, o := range objs {
		if o.Key() == k {
			return o, true
		}
	}
	return Object{}, false
}
