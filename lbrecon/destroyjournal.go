package lbrecon

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/go-logr/logr"
)

// Destructions in the journal: a destruction is recorded before its
// Destroy call leaves the process and again, Destroyed, once the provider
// accepted it, and kept until the deletion record is confirmed (a listing
// at its horizon no longer shows the object). A reconciler started after a
// crash, or in a new term, loads them as deletion records, so that a
// lagging listing that still shows a destroyed object is not taken for
// convergence, and the object is not destroyed a second time. Tests:
// destroyjournal_test.go, moving_replica_test.go.

// takes reports whether loadJournal keeps the journal entry in: by
// default those of the reconciler's scope and those recorded without one;
// a [Leftovers] takes the destructions of the load balancers it does not
// keep.
func (r *Reconciler) takes(in Intent) bool {
	if r.entries != nil {
		return r.entries(in)
	}
	return in.Scope == r.cfg.Scope || in.Scope == ""
}

// entryScope returns the scope a destruction of o is journaled under:
// the reconciler's, or for a [Leftovers], the load balancer o is on, so
// that a later reconciler of that load balancer (a move back) reads it.
func (r *Reconciler) entryScope(o Object) string {
	if r.scopeOf != nil {
		return r.scopeOf(o)
	}
	return r.cfg.Scope
}

// loadDestruction takes a destruction a predecessor journaled into the
// memory as a deletion record: deleting while listings show the object
// (one accepted is not sent again; one of unknown outcome is sent again
// once a listing shows it), gone at the first that does not. Called with
// memMu held.
func (r *Reconciler) loadDestruction(in Intent) {
	k := Key{Kind: in.Kind, ID: in.ID}
	if _, ok := r.mem.destructions[k]; ok {
		return // this reconciler's own: its memory knows the outcome better
	}
	r.mem.destructions[k] = in
	if r.mem.deletions[k] == nil {
		r.mem.deletions[k] = &deletion{at: in.At, unsure: !in.Destroyed}
	}
}

// destructionEntries returns the journal entries of the destructions of
// objs, made at now.
func (r *Reconciler) destructionEntries(objs []Object, now time.Time) []Intent {
	out := make([]Intent, len(objs))
	for i, o := range objs {
		out[i] = Intent{Scope: r.entryScope(o), Kind: o.Kind, Name: o.Name, ID: o.ID, At: now}
	}
	return out
}

// dropDestruction drops the journal entry of the destruction of k, if
// any, and queues its removal from the journal. Called with memMu held.
func (m *memory) dropDestruction(k Key) {
	in, ok := m.destructions[k]
	if !ok {
		return
	}
	delete(m.destructions, k)
	for i, a := range m.toAck {
		if a.key() == in.key() {
			m.toAck = append(m.toAck[:i:i], m.toAck[i+1:]...)
			break
		}
	}
	m.toForget = append(m.toForget, in)
}

// expireDestructions drops the entries no deletion record needs any more:
// that of an accepted destruction once its record is dropped (confirmed,
// or given up after ConfirmTimeout: the next destruction records anew),
// and that of a destruction of unknown outcome without a record (a
// transient failure; the plan destroys the object again) after
// ConfirmTimeout. Such a destruction whose object the listing does not
// show took effect: it gets a deletion record, gone. Called with memMu
// held, from merge.
func (r *Reconciler) expireDestructions(now time.Time, listed map[Key]bool) {
	m := &r.mem
	for k, in := range m.destructions {
		switch {
		case m.deletions[k] != nil:
		case in.Destroyed || now.Sub(in.At) >= r.cfg.ConfirmTimeout:
			m.dropDestruction(k)
		case !listed[k]:
			m.deletions[k] = &deletion{at: in.At, gone: true, horizon: r.horizonAfter(now)}
		}
	}
}

// recordDestructions records objs' destructions in the journal before
// they are sent, and reports whether they may be sent: nothing is sent
// that a successor could not recognise. Called with mu held, without
// memMu.
func (r *Reconciler) recordDestructions(ctx context.Context, p *plan, objs []Object) bool {
	if r.cfg.Journal == nil {
		return true
	}
	entries := r.destructionEntries(objs, r.clock.Now())
	if err := r.cfg.Journal.Record(ctx, entries); err != nil {
		if !errors.Is(err, errNoTime) {
			p.failed(ctx, fmt.Errorf("lbrecon: record %d destructions before destroying: %w", len(entries), err))
		}
		return false
	}
	r.memMu.Lock()
	defer r.memMu.Unlock()
	recorded := make(map[entryKey]bool, len(entries))
	for _, in := range entries {
		r.mem.destructions[Key{Kind: in.Kind, ID: in.ID}] = in
		recorded[in.key()] = true
	}
	// An earlier entry of the key queued for removal is this one now.
	r.mem.toForget = slices.DeleteFunc(r.mem.toForget, func(in Intent) bool { return recorded[in.key()] })
	return true
}

// destroyed records, in the memory, the outcome of the destruction of o
// for its journal entry: accepted (to be recorded as Destroyed), known
// not to have happened (forgotten), or unknown (kept as it is). Called
// with memMu held.
func (m *memory) destroyed(o Object, outcome destroyOutcome) {
	in, ok := m.destructions[o.Key()]
	if !ok {
		return
	}
	switch outcome {
	case destroyAccepted:
		in.Destroyed = true
		m.destructions[o.Key()] = in
		m.toAck = append(m.toAck, in)
	case destroyNotSent:
		m.dropDestruction(o.Key())
		if d := m.deletions[o.Key()]; d != nil && d.unsure {
			delete(m.deletions, o.Key()) // it stays: refused, or never sent
		}
	}
}

// destroyOutcome is what a Destroy call's answer says of its entry.
type destroyOutcome int

const (
	destroyUnknown  destroyOutcome = iota // the object may be destroyed or not
	destroyAccepted                       // destroyed, or being destroyed, or not found
	destroyNotSent                        // known not to have destroyed anything
)

// ackDestructions records the destructions the provider accepted as
// Destroyed, so that a successor sends none of them again. A failure is
// logged and retried at the next pass: until then a successor would send
// them once more. Called with mu held, without memMu.
func (r *Reconciler) ackDestructions(ctx context.Context) {
	if r.cfg.Journal == nil {
		return
	}
	r.memMu.Lock()
	acks := r.mem.toAck
	r.mem.toAck = nil
	r.memMu.Unlock()
	if len(acks) == 0 {
		return
	}
	if err := r.cfg.Journal.Record(ctx, acks); err != nil {
		if !errors.Is(err, errNoTime) {
			logr.FromContextOrDiscard(ctx).Error(err, "recording accepted destructions failed; retrying later", "entries", len(acks))
		}
		r.memMu.Lock()
		for _, in := range acks {
			if cur, ok := r.mem.destructions[Key{Kind: in.Kind, ID: in.ID}]; ok && cur.Destroyed {
				r.mem.toAck = append(r.mem.toAck, cur)
			}
		}
		r.memMu.Unlock()
	}
}

// unsettled returns how long a converged teardown still waits for its
// journaled destructions to be confirmed (a listing at their horizon no
// longer shows the objects) and forgotten, so that a successor started
// after the teardown returned finds no entry it still needs: zero when
// none is left. A horizon in listings alone is waited for by polling. It
// also returns the failure of the last Journal.Forget when a destruction's
// entry waits for its removal only because of it: the caller retries that
// as a transient failure, after a growing wait. Called with mu held.
func (r *Reconciler) unsettled() (time.Duration, error) {
	r.memMu.Lock()
	defer r.memMu.Unlock()
	now := r.clock.Now()
	var wait time.Duration
	for k := range r.mem.destructions {
		w := r.cfg.PollInterval
		if d := r.mem.deletions[k]; d != nil && d.gone && !d.horizon.at.IsZero() {
			w = max(d.horizon.at.Sub(now), w)
		}
		wait = max(wait, w)
	}
	var failed error
	for _, in := range r.mem.toForget {
		if in.ID != "" {
			wait = max(wait, r.cfg.PollInterval) // a Forget that failed: the next pass retries it
			failed = r.mem.forgetErr
		}
	}
	return wait, failed
}
