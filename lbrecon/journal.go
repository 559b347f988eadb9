package lbrecon

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/go-logr/logr"
)

// Intent is a journal entry: a creation the reconciler is about to send,
// recorded in a [Journal] before the Create call leaves the process, so
// that a reconciler started after a crash knows what its predecessor may
// have created although no listing shows it yet; or, with ID set, a
// destruction, recorded before the Destroy call leaves the process and
// again, Destroyed, once the provider accepted it, so that a reconciler
// started after a crash knows what its predecessor destroyed although a
// listing still shows it (see [Intent.ID]).
type Intent struct {
	// Scope is the reconciler's [Config.Scope] (for the load-balancer
	// plan, the load balancer's ID): reconcilers of several scopes may
	// share one journal, each with its own entries.
	Scope string `json:"scope,omitempty"`
	// Kind and Name are those of the object to create.
	Kind string `json:"kind"`
	Name string `json:"name"`
	// Spec is the spec's fingerprint ([SpecFingerprint]): an object of
	// the kind and name with another spec is not this creation.
	Spec string `json:"spec"`
	// Token is the idempotency token sent with the creation to an engine
	// that implements [IdempotentCreator].
	Token string `json:"token"`
	// At is when the intent was recorded.
	At time.Time `json:"at"`
	// ID is set on a destruction's entry: the object of Kind, Name and
	// this ID is being destroyed. Spec and Token are then empty. The
	// entry is recorded before the Destroy call is sent and kept until
	// a listing at the deletion's horizon no longer shows the object.
	ID string `json:"id,omitempty"`
	// Destroyed is set on a destruction's entry once the provider
	// accepted the Destroy call (or answered that the object is not
	// found): a successor does not send it again, and does not take the
	// object a lagging listing shows for there. A destruction's entry
	// without it is of unknown outcome (the process died before the
	// answer): a successor sends it again once a listing shows the
	// object.
	Destroyed bool `json:"destroyed,omitempty"`
}

// Journal keeps the reconciler's intents where they survive the process
// (a file, an object of the owner's), and its destructions. An entry is
// identified by its scope, kind, name and ID (empty for a creation's):
// reconcilers of one owner (one tag) with different
// scopes, such as the old and new load balancers of a [Moving], may share
// a journal and never replace or remove each other's entries. Each
// reconciler calls it from one goroutine at a time; a journal shared by
// several reconcilers must be safe for concurrent use. Record must be
// durable when it returns: the Create calls are sent only after it
// returned nil.
type Journal interface {
	// Load returns the intents recorded and not forgotten, of every
	// scope; a reconciler keeps those of its own scope (and those
	// recorded without a scope).
	Load(ctx context.Context) ([]Intent, error)
	// Record adds intents, replacing those of the same scope, kind,
	// name and ID.
	Record(ctx context.Context, intents []Intent) error
	// Forget removes the intents of the given scopes, kinds, names and
	// IDs (Spec, Token, At and Destroyed are ignored): a listing showed
	// their objects (or, for a destruction, showed them gone), they are
	// known not to have happened, or they expired.
	Forget(ctx context.Context, intents []Intent) error
}

// entryKey identifies a journal entry: scope, kind, name and, for a
// destruction's, ID.
type entryKey struct{ scope, kind, name, id string }

func (in Intent) key() entryKey { return entryKey{in.Scope, in.Kind, in.Name, in.ID} }

// NoJournal is the [Config.Journal] of a host that chooses to run without
// a journal: intents are kept in memory only, so a process started after
// a crash does not know what its predecessor may have created just
// before it died, and on a provider whose listing lags it creates those
// objects again. Its methods do nothing.
var NoJournal Journal = noJournal{}

type noJournal struct{}

func (noJournal) Load(context.Context) ([]Intent, error) { return nil, nil }
func (noJournal) Record(context.Context, []Intent) error { return nil }
func (noJournal) Forget(context.Context, []Intent) error { return nil }

// SpecFingerprint returns the text a [Journal] keeps of a spec: its type
// and its fields as fmt's %+v prints them. Two specs equal under
// [SameSpec] have equal fingerprints when they hold no pointers or maps.
func SpecFingerprint(spec any) string { return fmt.Sprintf("%T%+v", spec, spec) }

// intentToken returns a fresh idempotency token for a creation.
func (r *Reconciler) intentToken(o Object, fp string, at time.Time) string {
	r.tokenSeq++
	sum := sha256.Sum256(fmt.Appendf(nil, "%s\x00%s\x00%s\x00%s\x00%s\x00%d\x00%d",
		r.cfg.Tag, r.cfg.Scope, o.Kind, o.Name, fp, at.UnixNano(), r.tokenSeq))
	return hex.EncodeToString(sum[:16])
}

// loadJournal loads the journal once per Reconciler: the predecessor's
// intents hold their names until a listing shows their objects or
// ConfirmTimeout passes from when they were recorded. It runs before any
// other call of the journal, also when Check comes first: journalMu
// serialises the loads, and every other journal call follows one.
func (r *Reconciler) loadJournal(ctx context.Context) error {
	if r.cfg.Journal == nil {
		return nil
	}
	r.journalMu.Lock()
	defer r.journalMu.Unlock()
	if r.journalLoaded {
		return nil
	}
	intents, err := r.cfg.Journal.Load(ctx)
	if err != nil {
		return fmt.Errorf("lbrecon: load intent journal: %w", err)
	}
	r.memMu.Lock()
	defer r.memMu.Unlock()
	for _, in := range intents {
		if !r.takes(in) {
			continue // another reconciler's, sharing the journal
		}
		if in.ID != "" {
			r.loadDestruction(in)
			continue
		}
		nk := nameKey{in.Kind, in.Name}
		r.mem.entries[nk] = in
		if _, ok := r.mem.intents[nk]; !ok {
			// The predecessor's calls ended before this reconciler
			// started: a listing the lag after now shows their effect.
			r.mem.intents[nk] = &intent{obj: Object{Kind: in.Kind, Name: in.Name}, at: in.At, fp: in.Spec, token: in.Token,
				horizon: r.horizonAfter(r.clock.Now())}
		}
	}
	r.journalLoaded = true
	if n, d := len(r.mem.entries), len(r.mem.destructions); n+d > 0 {
		logr.FromContextOrDiscard(ctx).Info("loaded creations of unknown outcome and destructions from the intent journal", "intents", n, "destructions", d)
	}
	return nil
}

// forgetEntries removes from the journal the entries the memory no longer
// needs (Journal.Forget). A failure is logged and retried later: a stale intent only holds
// a name longer. Called with mu held, without memMu.
func (r *Reconciler) forgetEntries(ctx context.Context) {
	if r.cfg.Journal == nil {
		return
	}
	r.memMu.Lock()
	gone := r.mem.toForget
	r.mem.toForget = nil
	r.memMu.Unlock()
	if len(gone) == 0 {
		return
	}
	err := r.cfg.Journal.Forget(ctx, gone)
	if err != nil {
		logr.FromContextOrDiscard(ctx).Error(err, "removing journal entries failed; retrying later", "entries", len(gone))
	}
	r.memMu.Lock()
	defer r.memMu.Unlock()
	r.mem.forgetErr = err
	if err != nil {
		r.mem.toForget = append(r.mem.toForget, gone...)
	}
}

// matches reports whether listed object o is the creation of intent in.
func (in *intent) matches(o Object) bool {
	if o.Kind != in.obj.Kind || o.Name != in.obj.Name {
		return false
	}
	if in.obj.Spec != nil {
		return SameSpec(o.Spec, in.obj.Spec)
	}
	return SpecFingerprint(o.Spec) == in.fp
}
