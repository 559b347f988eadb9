package lbrecon

import (
	"time"
)

// The memory: what the reconciler keeps between passes (intents, acks,
// deletions, failure counts, pending times) so that a lagging listing
// cannot mislead it. merge.go folds a listing into it.

// nameKey identifies an object by kind and name, as steps do.
type nameKey struct{ kind, name string }

func nameOf(o Object) nameKey { return nameKey{o.Kind, o.Name} }

// The memory's vocabulary (see doc.go, "Names"): an intent is a creation
// whose outcome is not known yet, by name; an ack is a change the engine
// acknowledged (created, adopted, updated, repaired), by key; a deletion
// is an object the engine was asked to destroy, by key. Each is kept
// until it settles: until a listing at or past its horizon agrees with
// it (or ConfirmTimeout passes), since listings before the horizon may go
// backwards (read replicas) and miss what an earlier one showed.

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

// dropJournal removes the journal's intent for nk, if any, and queues its
// removal from the journal. Called with memMu held.
func (m *memory) dropJournal(nk nameKey) {
	if j, ok := m.journal[nk]; ok {
		delete(m.journal, nk)
		m.forget = append(m.forget, j.Intent)
	}
}
