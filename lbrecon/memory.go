package lbrecon

import (
	"fmt"
	"time"
)

// nameKey identifies an object by kind and name, as steps do.
type nameKey struct{ kind, name string }

func nameOf(o Object) nameKey { return nameKey{o.Kind, o.Name} }

// write is a change the engine acknowledged (or may have made) that no
// listing has reflected yet.
type write struct {
	obj Object    // the object as the engine returned it, or as desired
	at  time.Time // when the call was made
	// For intents: the spec's fingerprint (obj.Spec is nil for an intent
	// loaded from the journal), the idempotency token, and when a listing
	// that does not show the object proves it was not created: one started
	// at resolveAt or later (ListLag), or one whose number is resolveAfter
	// or more (ListLagListings); zero for neither: at ConfirmTimeout.
	// For written objects, resolveAfter is the first listing that must
	// show the write (ListLagListings), for pacing polls only.
	fp           string
	token        string
	resolveAt    time.Time
	resolveAfter uint64
}

// listing identifies one List call: when it started, and its number
// among this reconciler's List calls (counted from 1 as they start).
type listing struct {
	at time.Time
	n  uint64
}

// resolvedBy reports whether listing l reflects a call that returned when
// intent w's resolveAt or resolveAfter were set.
func (w *write) resolvedBy(l listing) bool {
	return (!w.resolveAt.IsZero() && !l.at.Before(w.resolveAt)) || (w.resolveAfter > 0 && l.n >= w.resolveAfter)
}

// memory is what the reconciler keeps between passes and calls, so that a
// listing that lags behind its writes cannot mislead it.
type memory struct {
	// written holds created, adopted, updated and repaired objects until a
	// listing shows them as written (tagged, with the written spec).
	written map[Key]*write
	// intents holds creations whose outcome is unknown (the call is in
	// flight, or failed in a way that may have created the object), by
	// name: the name is not created again until a listing shows the object
	// or ConfirmTimeout passes.
	intents map[nameKey]*write
	// destroyed holds destroyed objects until a listing no longer shows
	// them: they are being deleted, not to be destroyed again.
	destroyed map[Key]time.Time
	// failures counts repairs and recreations per name.
	failures map[nameKey]int
	// pendingSince is when an object was first seen pending.
	pendingSince map[Key]time.Time
	// noRepair and noUpdate hold objects the engine cannot repair or update
	// in place (it answered ErrNotSupported).
	noRepair map[Key]bool
	noUpdate map[Key]bool
	// journal holds the intents recorded in Config.Journal, until a
	// listing shows their objects or ConfirmTimeout passes; forget holds
	// those to remove from it at the next occasion.
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
		written:      make(map[Key]*write),
		intents:      make(map[nameKey]*write),
		destroyed:    make(map[Key]time.Time),
		failures:     make(map[nameKey]int),
		pendingSince: make(map[Key]time.Time),
		noRepair:     make(map[Key]bool),
		noUpdate:     make(map[Key]bool),
		conflicts:    make(map[nameKey]bool),
		journal:      make(map[nameKey]*journaled),
	}
}

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
	// Destructions are confirmed when the object is no longer listed; one
	// still listed after ConfirmTimeout is destroyed again.
	for k, at := range m.destroyed {
		if _, ok := byKey[k]; !ok {
			m.settleDestroy = min(now.Sub(at), r.cfg.MaxPollInterval)
			delete(m.destroyed, k)
		} else if now.Sub(at) >= r.cfg.ConfirmTimeout {
			delete(m.destroyed, k)
		}
	}
	// Writes are confirmed when the listing shows them.
	for k, w := range m.written {
		o, ok := byKey[k]
		if ok && r.owns(o) && SameSpec(o.Spec, w.obj.Spec) {
			if o.State == StateOK || o.State == StateFailed {
				m.settleWrite = min(now.Sub(w.at), r.cfg.MaxPollInterval)
			}
			delete(m.written, k)
			continue
		}
		if now.Sub(w.at) >= r.cfg.ConfirmTimeout {
			delete(m.written, k)
			continue
		}
		v.written = append(v.written, w.obj)
	}
	shown := func(w *write) bool {
		for _, o := range listed {
			if w.matches(o) && (r.owns(o) || !r.tagged(o)) {
				return true
			}
		}
		return false
	}
	for nk, w := range m.intents {
		switch {
		case shown(w):
			delete(m.intents, nk) // the journal's entry goes below
		case now.Sub(w.at) >= r.cfg.ConfirmTimeout, w.resolvedBy(listedAt):
			// Not created (a listing made after the list lag, in time or
			// in listings, does not show it), or given up on.
			delete(m.intents, nk)
			m.dropJournal(nk)
		default:
			v.held[nk] = true
		}
	}
	for nk, j := range m.journal {
		w := &write{obj: Object{Kind: j.Kind, Name: j.Name}, fp: j.Spec}
		if _, held := m.intents[nk]; !held && (shown(w) || now.Sub(j.At) >= r.cfg.ConfirmTimeout) {
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
		switch {
		case !r.tagged(o):
			v.untagged = append(v.untagged, o)
		case !r.owns(o):
		case !m.destroyed[k].IsZero():
			v.deleting = append(v.deleting, o)
		default:
			if w, ok := m.written[k]; ok {
				// The listing lags behind the write: plan from the write,
				// with the state the provider reports.
				o = w.obj.clone()
				o.State = byKey[k].State
			}
			v.owned = append(v.owned, o)
			inOwned[k] = true
		}
	}
	for k, w := range m.written {
		if !inOwned[k] && m.destroyed[k].IsZero() {
			v.owned = append(v.owned, w.obj.clone())
		}
	}
	// Pending times and failure counts.
	inView := make(map[Key]bool, len(v.owned))
	for _, o := range v.owned {
		inView[o.Key()] = true
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
// Called with memMu held.
func (m *memory) settled() time.Time {
	var t time.Time
	for _, w := range m.written {
		if e := w.at.Add(m.settleWrite); e.After(t) {
			t = e
		}
	}
	// Before any deletion was seen through, the list lag learnt from
	// writes is the best guess.
	destroy := m.settleDestroy
	if destroy == 0 {
		destroy = m.settleWrite
	}
	for _, at := range m.destroyed {
		if e := at.Add(destroy); e.After(t) {
			t = e
		}
	}
	return t
}

// newestWrite returns when the most recent write no listing has confirmed
// yet was made, leaving out the writes and intents that the listings
// made so far (listings) cannot show yet under ListLagListings: more
// listings, not more time, show them, so they are no reason to space the
// polls out. Called with memMu held.
func (m *memory) newestWrite(listings uint64) (time.Time, bool) {
	var t time.Time
	for _, w := range m.written {
		if w.resolveAfter <= listings {
			t = later(t, w.at)
		}
	}
	for _, w := range m.intents {
		if w.resolveAfter <= listings {
			t = later(t, w.at)
		}
	}
	for _, at := range m.destroyed {
		t = later(t, at)
	}
	return t, !t.IsZero()
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
