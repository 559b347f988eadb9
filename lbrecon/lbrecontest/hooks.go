package lbrecontest

import (
	"slices"
	"time"

	"github.com/reconkit/reconkit/lbrecon"
)

// Objects returns a copy of every stored object (including those being
// deleted), with its current state, sorted by ID.
func (e *Engine) Objects() []lbrecon.Object {
	e.mu.Lock()
	defer e.mu.Unlock()
	now := e.clock.Now()
	e.expire(now)
	out := make([]lbrecon.Object, 0, len(e.objs))
	for _, o := range e.objs {
		out = append(out, e.view(o, now))
	}
	slices.SortFunc(out, compareObjects)
	return out
}

// Put stores obj as it is, outside the API (no latency, not counted, listed
// at once), and returns it with its ID. An empty ID gets a fresh one; an
// empty state is ok.
func (e *Engine) Put(obj lbrecon.Object) lbrecon.Object {
	e.mu.Lock()
	defer e.mu.Unlock()
	if obj.ID == "" {
		obj.ID = e.newID(obj.Kind)
	}
	if obj.State == 0 {
		obj.State = lbrecon.StateOK
	}
	obj.Tags = slices.Clone(obj.Tags)
	e.objs[obj.Key()] = &object{Object: obj}
	e.track()
	return obj
}

// DeleteObject removes the object with key k outside the API, at once and
// from listings too, and reports whether there was one.
func (e *Engine) DeleteObject(k lbrecon.Key) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	_, found := e.objs[k]
	delete(e.objs, k)
	e.track()
	return found
}

// SetObjectState sets the state of the object with key k outside the API,
// and reports whether there was one.
func (e *Engine) SetObjectState(k lbrecon.Key, s lbrecon.State) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	o, found := e.objs[k]
	if found {
		o.State, o.readyAt, o.fails = s, time.Time{}, false
		e.notify()
	}
	return found
}

// Delete removes the objects with id, of any kind, as DeleteObject does.
//
// Deprecated: with [Config.IDsPerKind] it removes every kind's object with
// the ID; use DeleteObject.
func (e *Engine) Delete(id string) bool {
	found := false
	for _, k := range e.keysOf(id) {
		found = e.DeleteObject(k) || found
	}
	return found
}

// SetState sets the state of the objects with id, of any kind, as
// SetObjectState does.
//
// Deprecated: with [Config.IDsPerKind] it changes every kind's object with
// the ID; use SetObjectState.
func (e *Engine) SetState(id string, s lbrecon.State) bool {
	found := false
	for _, k := range e.keysOf(id) {
		found = e.SetObjectState(k, s) || found
	}
	return found
}

func (e *Engine) keysOf(id string) []lbrecon.Key {
	e.mu.Lock()
	defer e.mu.Unlock()
	var keys []lbrecon.Key
	for k := range e.objs {
		if k.ID == id {
			keys = append(keys, k)
		}
	}
	return keys
}
