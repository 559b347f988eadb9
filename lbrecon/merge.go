package lbrecon

import (
	"fmt"
	"time"
)

// Merging a listing with the memory: the view a plan is computed from
// (plan.go), and how each record of the memory is confirmed.

// view is a listing merged with the memory.
type view struct {
	owned       []Object // owned objects: listed, plus acked and not yet listed; minus those being deleted
	untagged    []Object // objects without a tag of the owner key: adoption candidates only
	deleting    []Object // owned objects destroyed and still listed
	resend      []Object // owned objects whose journaled destruction is of unknown outcome: destroyed again
	listed      map[Key]bool
	intended    map[nameKey]bool // names an intent holds (a creation of unknown outcome)
	unconfirmed []Object         // acks no listing has shown yet
	now         time.Time
	orphans     map[Key]bool // listed children taken as orphans when their parent is not listed (horizon.go)
	stale       bool         // the listing started before one already merged: merged into a copy of the memory (fold)
}

func (v *view) observation() *Observation {
	obs := NewObservation(v.owned)
	for k := range v.listed {
		obs.known[k] = true
	}
	obs.orphans = v.orphans
	obs.stale = v.stale
	return obs
}

// fold merges the listing listedAt into the memory and returns the view to
// plan from, and done, to call, with memMu still held, once the caller
// has computed what it needs from the view. Listings are merged in the
// order they started, whatever the order they return in (Check and
// Observe run beside a pass): a listing that started before one already
// merged is stale, and changes nothing. Its view is merged into a copy of
// the memory, which done drops: its caller gets what that listing shows,
// read against the memory, while the memory, the last listing merged
// (orphans) and what the steps record from their observations (the
// observation is marked stale) stay as the newer listing left them. A
// stale listing merged into the memory could make it forget what the
// newer one confirmed (statuses, pending times, the records a listing
// confirmed and dropped), or bring back what it saw gone. Called with
// memMu held.
func (r *Reconciler) fold(listed []Object, listedAt listing) (v *view, done func(), err error) {
	stale := listedAt.n < r.merged
	done = func() {}
	if stale {
		saved := r.mem
		r.mem = saved.clone()
		done = func() { r.mem = saved }
	}
	v, err = r.merge(listed, listedAt, stale)
	if err != nil {
		done()
		return nil, nil, err
	}
	if !stale {
		r.merged = listedAt.n
	}
	return v, done, nil
}

// merge folds a listing into the memory and returns the view to plan
// from; a stale listing (see fold) is not remembered as the last one
// merged. Called with memMu held, through fold.
func (r *Reconciler) merge(listed []Object, listedAt listing, stale bool) (*view, error) {
	now := r.clock.Now()
	m := &r.mem
	v := &view{listed: make(map[Key]bool, len(listed)), intended: make(map[nameKey]bool), now: now, stale: stale}
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
	if !stale {
		r.rememberListing(listedAt, v.listed)
	}
	v.orphans = r.orphans(listedAt)
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
	// (a later one showing it again lags: it is not believed), confirmed at
	// the first listing past the horizon that does not show it; one still
	// listed after ConfirmTimeout, never seen gone, is destroyed again.
	for k, d := range m.deletions {
		o, listed := byKey[k]
		if d.unsure {
			// A predecessor's destruction of unknown outcome: sent
			// again while listed (below), gone at the first listing
			// that does not show it.
			switch {
			case listed && !r.owns(o):
				delete(m.deletions, k)
			case !listed:
				d.unsure, d.gone, d.horizon = false, true, r.horizonAfter(now)
			}
			continue
		}
		switch {
		case !listed && d.gone && d.horizon.reachedBy(listedAt):
			delete(m.deletions, k)
		case !listed && !d.gone:
			m.destroyPace = min(now.Sub(d.at), r.cfg.MaxPollInterval)
			d.gone, d.horizon = true, r.horizonAfter(now)
		case listed && d.gone && d.horizon.reachedBy(listedAt):
			// A listing past the horizon shows it: it is there.
			d.gone, d.at = false, now
		case listed && !d.gone && now.Sub(d.at) >= r.cfg.ConfirmTimeout:
			delete(m.deletions, k)
		}
	}
	// Intents whose object a listing shows end; an owned one whose call
	// returned becomes a creation, seen, kept until a listing past the
	// horizon confirms it, so that a listing lagging again does not make
	// the name free. An object with a deletion record (destroyed, or seen
	// gone) is not an intent's: IDs are never reused, so it existed before
	// the call, and a replica lagging behind its destroy shows it again.
	// One shown untagged (a crash between create and tag) keeps the intent
	// until it is adopted (its ack then holds the name) or a listing at
	// the horizon shows it (every later one does): a listing lagging again
	// may miss it, and nothing else holds the name meanwhile.
	shown := func(in *intent) (Object, bool) {
		for _, o := range listed {
			if m.deletions[o.Key()] != nil {
				continue
			}
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
		case ok && r.owns(o):
			delete(m.intents, nk) // the journal entry goes with the creation
			if m.ackOf(o.Key()) == nil && m.deletions[o.Key()] == nil {
				m.ackCreate(o.clone(), in.at, in.horizon)
			}
		case now.Sub(in.at) >= r.cfg.ConfirmTimeout, r.lagDeclared() && in.horizon.reachedBy(listedAt):
			// Not created (a listing made after the list lag, in time or
			// in listings, does not show it), given up on, or shown
			// untagged at the horizon: the plan adopts it from the
			// listing.
			delete(m.intents, nk)
			m.dropEntry(nk)
		case ok && !r.lagDeclared():
			// Shown untagged, and with no lag declared the first listing
			// is trusted: the plan adopts it.
			delete(m.intents, nk)
		default:
			v.intended[nk] = true
		}
	}
	// Acks (creations and updates): seen at the first listing that shows
	// them, confirmed at the first listing past the horizon that shows
	// them, or that contradicts a seen one; an ack never seen is given up
	// after ConfirmTimeout.
	for k, a := range m.acks() {
		o, listed := byKey[k]
		shows := listed && r.owns(o) && SameSpec(o.Spec, a.obj.Spec)
		past := a.horizon.reachedBy(listedAt)
		if shows {
			a.seen = true
			a.obj.State = o.State
			if !a.final && (o.State == StateOK || o.State == StateFailed) {
				a.final = true
				m.writePace = min(now.Sub(a.at), r.cfg.MaxPollInterval)
			}
		}
		switch {
		case past && (shows || a.seen):
			m.dropAck(k)
		case !a.seen && now.Sub(a.at) >= r.cfg.ConfirmTimeout:
			m.dropAck(k)
		case !a.seen:
			v.unconfirmed = append(v.unconfirmed, a.obj)
		}
	}
	r.expireDestructions(now, v.listed)
	// A journal entry goes once no intent or ack of its name is left.
	named := make(map[nameKey]bool, len(m.created)+len(m.updated))
	for _, a := range m.acks() {
		named[nameOf(a.obj)] = true
	}
	for nk, in := range m.entries {
		if _, holds := m.intents[nk]; (!holds && !named[nk]) || now.Sub(in.At) >= r.cfg.ConfirmTimeout {
			m.dropEntry(nk)
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
		d, a := m.deletions[k], m.ackOf(k)
		if d != nil && d.unsure && r.owns(o) {
			// Destroyed again, and until then planned from as there:
			// the predecessor's call may not have reached the provider.
			v.resend = append(v.resend, o)
			d = nil
		}
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
	for k, a := range m.acks() {
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

// findOwned returns the object with key k among objs.
func findOwned(objs []Object, k Key) (Object, bool) {
	for _, o := range objs {
		if o.Key() == k {
			return o, true
		}
	}
	return Object{}, false
}
