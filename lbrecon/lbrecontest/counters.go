package lbrecontest

import (
	"maps"

	"github.com/reconkit/reconkit/lbrecon"
)

// Calls returns the number of calls made so far, by verb.
func (e *Engine) Calls() map[lbrecon.Verb]int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return maps.Clone(e.calls)
}

// TotalCalls returns the number of calls made so far.
func (e *Engine) TotalCalls() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for _, c := range e.calls {
		n += c
	}
	return n
}

// Requests returns the provider requests made so far under the cost model:
// a List that returns N objects costs 1 + N, every other call 1.
func (e *Engine) Requests() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.requests
}

// ResetCalls sets every call and request counter back to zero.
func (e *Engine) ResetCalls() {
	e.mu.Lock()
	defer e.mu.Unlock()
	clear(e.calls)
	e.requests = 0
}

// Low returns, per parent, the fewest existing children of kind it held
// since the last ResetLow (or since it got its first child), counting
// objects being deleted as gone and pending ones as present.
func (e *Engine) Low(kind string) map[string]int {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make(map[string]int)
	for k, n := range e.low {
		if k.Kind == kind {
			out[k.ID] = n
		}
	}
	return out
}

// ResetLow starts the tracking of Low afresh from the current counts.
func (e *Engine) ResetLow() {
	e.mu.Lock()
	defer e.mu.Unlock()
	clear(e.low)
	e.track()
}

// notify wakes the WaitFor calls. Called with e.mu held.
func (e *Engine) notify() {
	e.snap()
	if e.changed != nil {
		close(e.changed)
		e.changed = nil
	}
}

// track updates the low-water marks after a change of the objects, and
// wakes the WaitFor calls. Called with e.mu held.
func (e *Engine) track() {
	e.notify()
	counts := make(map[lbrecon.Key]int)
	for _, o := range e.objs {
		if !o.goneAt.IsZero() {
			continue
		}
		for _, k := range e.cfg.Refs(o.Object) {
			counts[lbrecon.Key{Kind: o.Kind, ID: k.ID}]++
		}
	}
	for k, n := range counts {
		if l, ok := e.low[k]; !ok || n < l {
			e.low[k] = n
		}
	}
	for k := range e.low {
		if _, ok := counts[k]; !ok {
			e.low[k] = 0
		}
	}
}
