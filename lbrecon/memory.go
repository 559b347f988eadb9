package lbrecon

import (
	"iter"
	"maps"
	"slices"
	"time"
)

// The memory: what the reconciler keeps between passes (intents,
// creations, updates, deletions, journal entries, failure counts, pending
// times) so that a lagging listing cannot mislead it. merge.go folds a
// listing into it.

// nameKey identifies an object by kind and name, as steps do.
type nameKey struct{ kind, name string }

func nameOf(o Object) nameKey { return nameKey{o.Kind, o.Name} }

// The memory's records (see doc.go, "Names"), one type each: an intent
// is a creation whose outcome is not known yet, by name; a creation is a
// creation the engine acknowledged, and an update an update, repair or
// adoption it acknowledged, by key (the two acks; a key has at most one);
// a deletion is an object the engine was asked to destroy, by key; an
// entry is an intent's copy in the journal, by name. A record is kept
// until a listing at or past its horizon agrees with it (its
// confirmation), or ConfirmTimeout passes, since listings before the
// horizon may go backwards (read replicas) and miss what an earlier one
// showed.

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

// ack is what a creation and an update share: the object the engine
// acknowledged and how far listings have confirmed it. It is unconfirmed
// until a listing shows obj, then seen; it is confirmed (and dropped) when
// a listing at its horizon shows obj, or when a listing at its horizon
// disagrees with a seen ack (that listing is the truth).
type ack struct {
	obj     Object    // as the engine returned it; State is the last one listed once seen
	at      time.Time // when the call was made
	horizon horizon   // the first listing that reflects the call
	seen    bool      // a listing showed it
	final   bool      // a listing showed it ok or failed (its pending time is learnt)
}

// creation is a creation the engine acknowledged (Create answered, or an
// intent whose object a listing showed): the object exists, though a
// listing before its horizon may not show it. The plan counts it as
// there, so its name is not created again.
type creation struct{ ack }

// update is an update, repair or adoption (tagging) the engine
// acknowledged: the object has obj's spec, state and tags, though a
// listing before its horizon may show it as it was. The plan compares
// against obj, so the change is not made again.
type update struct{ ack }

// deletion is an object the engine was asked to destroy. It is deleting
// while listings still show it; gone once one does not (a later listing
// that shows it again before its horizon lags, and is not believed); it
// is confirmed when a listing at its horizon, counted from when it was
// first seen gone, does not show it.
type deletion struct {
	at      time.Time // when the call was made
	gone    bool
	horizon horizon // set when first seen gone
	// unsure marks a destruction a predecessor journaled and may not have
	// sent (its entry never marked Destroyed): the object is sent again
	// once a listing shows it, and gone at the first that does not.
	unsure bool
}

// memory is what the reconciler keeps between passes and calls, so that a
// listing that lags behind its writes cannot mislead it.
type memory struct {
	// intents holds creations of unknown outcome by name: the name is not
	// created again while the intent is kept.
	intents map[nameKey]*intent
	// created and updated hold the acks until they are confirmed: the
	// plan is made from them, not from a listing that lacks them. A key
	// is in one of them at most (see ackCreate, ackUpdate).
	created map[Key]*creation
	updated map[Key]*update
	// deletions holds destroyed objects until they are confirmed: they
	// are being deleted, not to be destroyed again, and once gone not to
	// be believed back.
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
	// entries holds the intents recorded in Config.Journal, until
	// neither an intent nor an ack of their name is left (or
	// ConfirmTimeout passes); toForget holds those to remove from it
	// (Journal.Forget) at the next occasion.
	entries  map[nameKey]Intent
	toForget []Intent
	// destructions holds the destructions recorded in Config.Journal, by
	// key, until their deletion record is dropped (or, for one whose
	// outcome is unknown, ConfirmTimeout passes); toAck holds those to
	// record again as Destroyed at the next occasion (destroyjournal.go).
	destructions map[Key]Intent
	toAck        []Intent
	// forgetErr is the failure of the last Journal.Forget, nil once one
	// succeeded: a teardown waiting only for it is retried as after a
	// transient failure, not every PollInterval.
	forgetErr error
	// conflicts holds names whose creation the engine refused because the
	// name is taken: the old object of that name is destroyed first.
	conflicts map[nameKey]bool
	// writePace and destroyPace are the last observed times from a
	// write to a listing that shows it done (listed and out of pending, or
	// no longer listed): the provider's pending period and list lag, learnt,
	// so that waits do not poll before a listing can tell anything new.
	// They are capped at MaxPollInterval.
	writePace, destroyPace time.Duration
}

func newMemory() memory {
	return memory{
		intents:      make(map[nameKey]*intent),
		created:      make(map[Key]*creation),
		updated:      make(map[Key]*update),
		deletions:    make(map[Key]*deletion),
		failures:     make(map[nameKey]int),
		pendingSince: make(map[Key]time.Time),
		noRepair:     make(map[Key]bool),
		noUpdate:     make(map[Key]bool),
		status:       make(map[Key]any),
		waitSince:    make(map[Key]time.Time),
		firstSeen:    make(map[Key]listing),
		conflicts:    make(map[nameKey]bool),
		entries:      make(map[nameKey]Intent),
		destructions: make(map[Key]Intent),
	}
}

// clone returns a copy of m that shares nothing merge or compute change:
// what a stale listing is merged into (see Reconciler.fold). Called with
// memMu held.
func (m *memory) clone() memory {
	c := *m
	c.intents = cloneEach(m.intents)
	c.created = cloneEach(m.created)
	c.updated = cloneEach(m.updated)
	c.deletions = cloneEach(m.deletions)
	c.failures = maps.Clone(m.failures)
	c.pendingSince = maps.Clone(m.pendingSince)
	c.noRepair = maps.Clone(m.noRepair)
	c.noUpdate = maps.Clone(m.noUpdate)
	c.status = maps.Clone(m.status)
	c.firstSeen = maps.Clone(m.firstSeen)
	c.waitSince = maps.Clone(m.waitSince)
	c.entries = maps.Clone(m.entries)
	c.toForget = slices.Clone(m.toForget)
	c.destructions = maps.Clone(m.destructions)
	c.toAck = slices.Clone(m.toAck)
	c.conflicts = maps.Clone(m.conflicts)
	return c
}

// cloneEach copies m and each record its values point to.
func cloneEach[K comparable, V any](m map[K]*V) map[K]*V {
	c := make(map[K]*V, len(m))
	for k, v := range m {
		cp := *v
		c[k] = &cp
	}
	return c
}

// dropEntry drops the journal entry for nk, if any, and queues its
// removal from the journal. Called with memMu held.
func (m *memory) dropEntry(nk nameKey) {
	if in, ok := m.entries[nk]; ok {
		delete(m.entries, nk)
		m.toForget = append(m.toForget, in)
	}
}

// ackCreate records the creation of o, acknowledged at at with horizon
// h, in place of any ack of its key. Called with memMu held.
func (m *memory) ackCreate(o Object, at time.Time, h horizon) {
	delete(m.updated, o.Key())
	m.created[o.Key()] = &creation{ack{obj: o, at: at, horizon: h}}
}

// ackUpdate records the update, repair or adoption of o, acknowledged at
// at with horizon h, in place of any ack of its key. Called with memMu
// held.
func (m *memory) ackUpdate(o Object, at time.Time, h horizon) {
	delete(m.created, o.Key())
	m.updated[o.Key()] = &update{ack{obj: o, at: at, horizon: h}}
}

// ackOf returns the ack of key k, a creation's or an update's, or nil.
// Called with memMu held.
func (m *memory) ackOf(k Key) *ack {
	if c, ok := m.created[k]; ok {
		return &c.ack
	}
	if u, ok := m.updated[k]; ok {
		return &u.ack
	}
	return nil
}

// acks yields every ack by key: the creations', then the updates'.
// Called with memMu held.
func (m *memory) acks() iter.Seq2[Key, *ack] {
	return func(yield func(Key, *ack) bool) {
		for k, c := range m.created {
			if !yield(k, &c.ack) {
				return
			}
		}
		for k, u := range m.updated {
			if !yield(k, &u.ack) {
				return
			}
		}
	}
}

// dropAck drops the ack of key k, if any. Called with memMu held.
func (m *memory) dropAck(k Key) {
	delete(m.created, k)
	delete(m.updated, k)
}
