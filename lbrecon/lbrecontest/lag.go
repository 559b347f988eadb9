package lbrecontest

import (
	"slices"
	"time"

	"github.com/reconkit/reconkit/lbrecon"
)

type tombstone struct {
	obj   lbrecon.Object
	until time.Time
}

// expire completes deletions and drops old tombstones. Called with e.mu held.
func (e *Engine) expire(now time.Time) {
	changed := false
	for k, o := range e.objs {
		if !o.goneAt.IsZero() && !now.Before(o.goneAt) {
			e.bury(o, o.goneAt) // gone then, not when first noticed
			delete(e.objs, k)
			changed = true
		}
	}
	for _, o := range e.objs {
		changed = e.promote(o, now) || changed
	}
	e.tombs = slices.DeleteFunc(e.tombs, func(t tombstone) bool { return !now.Before(t.until) })
	if changed {
		e.track()
	}
}

// bury keeps an object deleted at gone listed until gone+ListLag. Called
// with e.mu held.
func (e *Engine) bury(o *object, gone time.Time) {
	if now := e.clock.Now(); e.cfg.ListLag > 0 && !gone.Before(o.visibleAt) && now.Before(gone.Add(e.cfg.ListLag)) {
		e.tombs = append(e.tombs, tombstone{obj: e.listView(o, gone), until: gone.Add(e.cfg.ListLag)})
	}
}

// listView is what List shows of o: its listed version while the last
// change is not visible yet. Called with e.mu held.
func (e *Engine) listView(o *object, now time.Time) lbrecon.Object {
	v := e.view(o, now)
	if now.Before(o.listedAt) {
		l := o.listed
		l.State = v.State
		l.Tags = slices.Clone(l.Tags)
		return l
	}
	return v
}

// remember keeps o's listed version before a change, for ListLag. Called
// with e.mu held.
func (e *Engine) remember(o *object) {
	if e.cfg.ListLag <= 0 {
		return
	}
	now := e.clock.Now()
	if !now.Before(o.listedAt) {
		o.listed = o.Object
		o.listed.Tags = slices.Clone(o.Tags)
	}
	o.listedAt = now.Add(e.cfg.ListLag)
}

// ListLagListings implements lbrecon.ListingLagger: Config.LagListings
// with Config.DeclareListLag and no ListLag, else 0 (none declared: with
// a ListLag too, an object shows only after both, so the count alone is
// no bound).
func (e *Engine) ListLagListings() int {
	if !e.cfg.DeclareListLag || e.cfg.ListLag > 0 || e.cfg.ReplicaLag > 0 {
		return 0
	}
	return e.cfg.LagListings
}

// ListLag implements lbrecon.ListLagger: with Config.DeclareListLag,
// Config.ReplicaLag when set, else Config.ListLag without LagListings;
// otherwise 0 (none declared).
func (e *Engine) ListLag() time.Duration {
	if e.cfg.DeclareListLag && e.cfg.ReplicaLag > 0 {
		return e.cfg.ReplicaLag
	}
	if !e.cfg.DeclareListLag || e.cfg.LagListings > 0 {
		return 0
	}
	return e.cfg.ListLag
}

// promote shows o's assigned status once its time came, and reports
// whether it did. Called with e.mu held.
func (e *Engine) promote(o *object, now time.Time) bool {
	if o.assigned == nil || now.Before(o.assignAt) || !o.goneAt.IsZero() {
		return false
	}
	e.remember(o) // a lagging listing shows the object as before
	o.Status, o.assigned = o.assigned, nil
	return true
}
