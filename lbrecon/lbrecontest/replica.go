package lbrecontest

import (
	"slices"
	"time"

	"github.com/reconkit/reconkit/lbrecon"
)

// version is one state of an object as the provider's primary stored it,
// from at on; gone marks its deletion.
type version struct {
	at      time.Time
	obj     lbrecon.Object
	readyAt time.Time // the pending period ends then (zero: obj.State holds)
	fails   bool
	gone    bool
	late    bool // a creation whose answer was lost: replicas show it last
}

// snap records, with ReplicaLag, every object whose stored state changed
// since its last version, and the deletion of every object gone. Called
// with e.mu held, at every change.
func (e *Engine) snap() {
	if e.cfg.ReplicaLag <= 0 {
		return
	}
	now := e.clock.Now()
	for k, o := range e.objs {
		h := e.hist[k]
		v := version{at: now, obj: o.Object, readyAt: o.readyAt, fails: o.fails}
		if n := len(h); n > 0 && !h[n-1].gone && sameVersion(h[n-1], v) {
			continue
		}
		v.obj.Tags = slices.Clone(o.Tags)
		v.late = o.late // and every later version of it: no replica shows it early
		e.hist[k] = append(h, v)
	}
	for k, h := range e.hist {
		if _, ok := e.objs[k]; !ok && !h[len(h)-1].gone {
			e.hist[k] = append(h, version{at: now, obj: h[len(h)-1].obj, gone: true})
		}
	}
}

func sameVersion(a, b version) bool {
	return a.obj.State == b.obj.State && a.readyAt.Equal(b.readyAt) && a.fails == b.fails &&
		slices.Equal(a.obj.Tags, b.obj.Tags) && lbrecon.SameSpec(a.obj.Spec, b.obj.Spec) &&
		lbrecon.SameSpec(a.obj.Status, b.obj.Status)
}

// replicaList returns what a read replica shows now: per object, the
// newest version older than a lag drawn afresh for this listing, uniform
// in [0, ReplicaLag], or in [ReplicaLag/2, ReplicaLag] for a creation
// whose answer was lost. Each listing draws its own lags, so one may miss what the one
// before showed. Called with e.mu held.
func (e *Engine) replicaList(now time.Time) []lbrecon.Object {
	e.prune(now)
	var out []lbrecon.Object
	keys := make([]lbrecon.Key, 0, len(e.hist))
	for k := range e.hist {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b lbrecon.Key) int {
		return compareObjects(lbrecon.Object{Kind: a.Kind, ID: a.ID}, lbrecon.Object{Kind: b.Kind, ID: b.ID})
	})
	for _, k := range keys { // in a fixed order, so that a seed replays
		lag := time.Duration(e.rng.Int64N(int64(e.cfg.ReplicaLag) + 1))
		late := e.cfg.ReplicaLag - lag/2
		var shown *version
		for i := range e.hist[k] {
			v := &e.hist[k][i]
			l := lag
			if v.late {
				l = late
			}
			if !v.at.Add(l).After(now) {
				shown = v
			}
		}
		if shown == nil || shown.gone {
			continue
		}
		o := shown.obj
		o.Tags = slices.Clone(o.Tags)
		if o.State == lbrecon.StatePending && !shown.readyAt.IsZero() && !now.Add(-lag).Before(shown.readyAt) {
			o.State = lbrecon.StateOK
			if shown.fails {
				o.State = lbrecon.StateFailed
			}
		}
		out = append(out, o)
	}
	return out
}

// prune drops the versions no replica can show any more: those older than
// a newer version that every replica shows. Called with e.mu held.
func (e *Engine) prune(now time.Time) {
	for k, h := range e.hist {
		keep := 0
		for i, v := range h {
			if !v.at.Add(e.cfg.ReplicaLag).After(now) {
				keep = i
			}
		}
		h = h[keep:]
		if len(h) == 1 && h[0].gone && !h[0].at.Add(e.cfg.ReplicaLag).After(now) {
			delete(e.hist, k)
			continue
		}
		e.hist[k] = h
	}
}
