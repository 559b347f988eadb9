package storecheck

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/reconkit/reconkit/versiongate"
)

// rec is a record as the model knows it. lease and modRev are 0 when
// unknown (a publish whose answer was lost).
type rec struct {
	value  string
	lease  int64
	modRev int64
	// lost: a keep-alive reported the lease lost while the record may
	// linger (Input.Lingers): it can still be listed, never kept alive.
	lost bool
}

// state is the store as the model knows it: what the operations
// linearized so far prove. It is never modified once built.
type state struct {
	// rev is the highest revision reported so far.
	rev int64
	// records holds every record not yet proven gone. A record may have
	// expired since without any operation showing it: operations that
	// prove a record gone remove it, none requires it present except those
	// that observed it (list, keepalive).
	records map[string]rec
	status  string
	exists  bool
	// fence and fenced: the highest token that fenced the store (terms
	// fenced by their token).
	fence  uint64
	fenced bool
	// high is the highest token of a guarded term whose fence or write
	// succeeded; dead holds guarded tokens refused once (their guard
	// never holds again).
	high uint64
	dead []uint64
	// marked: the status holds a write not yet validated (stores that
	// validate after writing, Input.Tentative), applied by the write
	// markBy (an operation's index), which replaced the status markPrev
	// (markPrevExists false: none). A refusal of that write, or a Fence of
	// a later term, puts markPrev back.
	marked         bool
	markPrev       string
	markPrevExists bool
	markBy         int
	// halves tracks the two halves of a tentative write (see call) while
	// only one has been linearized: halfApplied or halfSettled.
	halves map[int]byte
	// pending counts the open publishes of each record ID and value whose
	// call has passed (see resolveOpen) and that have not taken effect:
	// one takes effect just before an operation that needs its record.
	pending map[pend]int
	// compacted is the highest revision the watch history moved on
	// from (KindMovedOn): a watch from it or below may end too old.
	compacted int64
	// gone holds, for each ID a record of which was proven gone (by a
	// delete, an expiry a listing or keep-alive showed, a publish that
	// replaced it, a write that needed it expired, or a watch's batch that
	// showed it deleted), the highest revision at which such a record was
	// created: its deletion came after that revision, and no later than
	// the point where the model removed it. See stepRecordsEvent.
	gone map[string]int64
	// claimed holds, on a store whose publish claims the ID with an
	// object of its own before it creates the record (Input.Lingers: the
	// Kubernetes store's heartbeat Lease), each ID a publish was called
	// for. The claim may outlive a publish that failed (cut, or its
	// record's create refused and the claim's delete lost) and a record
	// that is gone, until a publish or the reaper judges it dead: a
	// publish of such an ID may be refused as held with no record to
	// list.
	claimed map[string]bool
	// ghosts holds each record (ID and value) the model removed: a
	// listing may still show it held (Output.Held), as the Kubernetes
	// store lists a record seen deleted while the heartbeat it named may
	// still be renewed (its node may still serve).
	ghosts map[pend]bool
	// key identifies the state, for Equal and Hash; base is key without
	// pending.
	key, base string
}

// pend is the record an open publish makes: its ID and value.
type pend struct{ id, value string }

// The values of state.halves.
const (
	halfApplied byte = 'a'
	halfSettled byte = 's'
)

func (s *state) clone() *state {
	c := *s
	c.records = maps.Clone(s.records)
	c.dead = slices.Clone(s.dead)
	c.halves = maps.Clone(s.halves)
	if c.halves == nil {
		c.halves = map[int]byte{}
	}
	c.pending = maps.Clone(s.pending)
	if c.pending == nil {
		c.pending = map[pend]int{}
	}
	c.gone = maps.Clone(s.gone)
	if c.gone == nil {
		c.gone = map[string]int64{}
	}
	c.claimed = maps.Clone(s.claimed)
	if c.claimed == nil {
		c.claimed = map[string]bool{}
	}
	c.ghosts = maps.Clone(s.ghosts)
	if c.ghosts == nil {
		c.ghosts = map[pend]bool{}
	}
	return &c
}

// remove removes the record id, proven gone, notes its deletion in gone
// and keeps it among the ghosts. A record of unknown revision leaves no
// note in gone: which record of the ID it was is not known.
func (s *state) remove(id string) {
	r, ok := s.records[id]
	if ok && r.modRev != 0 {
		s.gone[id] = max(s.gone[id], r.modRev)
	}
	if ok {
		s.ghosts[pend{id, r.value}] = true
	}
	delete(s.records, id)
}

// put makes r the record id; a record of the ID it replaces is gone
// (records are created only if absent).
func (s *state) put(id string, r rec) {
	if old, ok := s.records[id]; ok && old != r {
		s.remove(id)
	}
	s.records[id] = r
}

// freeze computes s's key, which Equal and Hash compare.
func (s *state) freeze() *state {
	var b strings.Builder
	fmt.Fprintf(&b, "rev=%d status=%t:%q fence=%t:%d high=%d dead=%v compacted=%d", s.rev, s.exists, s.status, s.fenced, s.fence, s.high, s.dead, s.compacted)
	if s.marked {
		fmt.Fprintf(&b, " mark=%d:%t:%q", s.markBy, s.markPrevExists, s.markPrev)
	}
	for _, id := range slices.Sorted(maps.Keys(s.halves)) {
		fmt.Fprintf(&b, " half%d=%c", id, s.halves[id])
	}
	b.WriteString(" records:")
	for _, id := range slices.Sorted(maps.Keys(s.records)) {
		r := s.records[id]
		fmt.Fprintf(&b, " %s=%q/%x/%d/%t", id, r.value, r.lease, r.modRev, r.lost)
	}
	b.WriteString(" gone:")
	for _, id := range slices.Sorted(maps.Keys(s.gone)) {
		fmt.Fprintf(&b, " %s=%d", id, s.gone[id])
	}
	b.WriteString(" claimed:")
	for _, id := range slices.Sorted(maps.Keys(s.claimed)) {
		fmt.Fprintf(&b, " %s", id)
	}
	b.WriteString(" ghosts:")
	for _, g := range slices.SortedFunc(maps.Keys(s.ghosts), comparePend) {
		fmt.Fprintf(&b, " %s=%q", g.id, g.value)
	}
	s.base = b.String()
	b.WriteString(" pending:")
	for _, p := range sortedPending(s.pending) {
		fmt.Fprintf(&b, " %s=%q/%d", p.id, p.value, s.pending[p])
	}
	s.key = b.String()
	return s
}

func (s *state) describe() string {
	var b strings.Builder
	fmt.Fprintf(&b, "rev ≥ %d; status ", s.rev)
	if s.exists {
		b.WriteString(short(s.status))
	} else {
		b.WriteString("none")
	}
	if s.fenced {
		fmt.Fprintf(&b, "; fence %d", s.fence)
	}
	if s.marked {
		prev := "none"
		if s.markPrevExists {
			prev = short(s.markPrev)
		}
		fmt.Fprintf(&b, "; unvalidated (replaced %s)", prev)
	}
	if s.high > 0 || len(s.dead) > 0 {
		fmt.Fprintf(&b, "; guarded high %d, ended %v", s.high, s.dead)
	}
	b.WriteString("; records")
	for _, id := range slices.Sorted(maps.Keys(s.records)) {
		r := s.records[id]
		fmt.Fprintf(&b, " %s(lease %x, rev %d", id, r.lease, r.modRev)
		if r.lost {
			b.WriteString(", lost")
		}
		b.WriteString(")")
	}
	if len(s.pending) > 0 {
		b.WriteString("; open publishes of")
		for _, p := range sortedPending(s.pending) {
			fmt.Fprintf(&b, " %s=%s (%d)", p.id, short(p.value), s.pending[p])
		}
	}
	return b.String()
}

func sortedPending(m map[pend]int) []pend {
	return slices.SortedFunc(maps.Keys(m), comparePend)
}

func comparePend(a, b pend) int {
	return cmp.Or(cmp.Compare(a.id, b.id), cmp.Compare(a.value, b.value))
}

// termHolds reports whether a fence or write of in's term may succeed now.
func (s *state) termHolds(in Input, fencing bool) bool {
	if in.Guarded {
		return !slices.Contains(s.dead, in.Token) && in.Token >= s.high
	}
	if fencing {
		return !s.fenced || s.fence <= in.Token
	}
	return s.fenced && s.fence <= in.Token
}

// newer reports the records that a write conditioned on nodesRev may have
// found changed: known to be newer, or of unknown revision.
func (s *state) newer(nodesRev int64) (known, maybe bool) {
	for _, r := range s.records {
		switch {
		case r.modRev == 0:
			maybe = true
		case r.modRev > nodesRev:
			known = true
		}
	}
	return known, maybe
}

// step returns every state the store may be in after in returned out from
// s; none if it could not have.
func step(s *state, in Input, out Output) []*state {
	if res, ok := stepWatch(s, in, out); ok {
		return res
	}
	next := s.clone()
	one := func() []*state { return []*state{next.freeze()} }
	switch in.Kind {
	case KindPublish:
		// Held is judged on the claims before this publish's own.
		claimed := s.claimed[in.ID]
		if in.Lingers && !claimed {
			// Whatever its outcome, it may have left its claim.
			s = s.clone()
			s.claimed[in.ID] = true
			s.freeze()
			next.claimed[in.ID] = true
		}
		switch out.Outcome {
		case OK:
			// A record with the same ID in the model may have expired
			// unseen: the new one replaces it.
			if out.Rev <= s.rev {
				return nil
			}
			next.rev = out.Rev
			next.put(in.ID, rec{value: in.Value, lease: out.Lease, modRev: out.Rev})
			return one()
		case Held:
			// A record of the ID holds it; on a store that claims
			// the ID first, an earlier publish's claim may too.
			if _, ok := s.records[in.ID]; !ok && !claimed {
				return nil
			}
			return one()
		case Unknown:
			next.put(in.ID, rec{value: in.Value})
			return []*state{s, next.freeze()}
		}
	case KindKeepAlive:
		r, ok := s.records[in.ID]
		held := ok && r.lease == in.Lease
		switch out.Outcome {
		case OK:
			if !held || r.lost {
				return nil
			}
			return []*state{s}
		case Lost:
			switch {
			case held && in.Lingers:
				r.lost = true
				next.records[in.ID] = r
			case held:
				next.remove(in.ID)
			}
			return one()
		}
	case KindDelete:
		if r, ok := s.records[in.ID]; ok && r.lease == in.Lease {
			next.remove(in.ID)
		}
		switch out.Outcome {
		case OK:
			return one()
		case Unknown:
			return []*state{s, next.freeze()}
		}
	case KindList:
		if out.Rev < s.rev {
			return nil
		}
		next.rev = out.Rev
		listed := map[string]bool{}
		for _, r := range out.Records {
			m, ok := s.records[r.ID]
			if ok && m.value == string(r.Value) && m.modRev <= out.Rev {
				listed[r.ID] = true
				continue
			}
			// A held record is one the store saw deleted: the model's
			// record, or one it removed. It shows no record present at
			// out.Rev, so the model's record of the ID, if another, is
			// gone.
			if !slices.Contains(out.Held, r.ID) || !s.ghosts[pend{r.ID, string(r.Value)}] {
				return nil
			}
		}
		for id := range s.records {
			if !listed[id] {
				next.remove(id) // expired
			}
		}
		return one()
	case KindRead:
		// The revision is the store's at the read, as a linearizable
		// read's must be: not below any revision reported before it. A
		// store that handed back an older one (the Kubernetes store once
		// reported the status object's own resourceVersion) would have
		// its watches start where the server may no longer serve them.
		if out.Exists != s.exists || out.Value != s.status || out.Rev < s.rev {
			return nil
		}
		next.rev = max(s.rev, out.Rev)
		return one()
	case KindFence:
		holds := s.termHolds(in, true)
		apply := func() *state {
			n := s.clone()
			if in.Guarded {
				n.high = in.Token
			} else {
				if !s.fenced || s.fence < in.Token {
					n.undo() // a later term undoes a write never validated
				}
				n.fence, n.fenced = in.Token, true
			}
			return n.freeze()
		}
		switch out.Outcome {
		case OK:
			if !holds {
				return nil
			}
			return []*state{apply()}
		case Lost:
			if in.Guarded {
				// A guard fails for good once its term ended, whenever
				// that was.
				return []*state{refuse(s, in.Token)}
			}
			if holds {
				return nil
			}
			return []*state{s}
		case Unknown:
			if holds {
				return []*state{s, apply()}
			}
			return []*state{s}
		}
	case KindWrite:
		return stepWrite(s, in, out)
	}
	return nil
}

// stepEnable counts an open publish pending: from here on it may take
// effect, just before an operation that needs its record (stepNeeding).
func stepEnable(s *state, c call) []*state {
	n := s.clone()
	n.pending[pend{c.ID, c.Value}]++
	if c.Lingers {
		n.claimed[c.ID] = true
	}
	return []*state{n.freeze()}
}

// stepNeeding steps c by stepc from s; if c cannot step from s, it steps
// c from s with pending publishes taken effect just before it, those that
// c may need (see resolveOpen): the records a listing shows, a record of
// the ID for a publish refused as held or a keep-alive of lease 0, and a
// record of unknown revision for a write refused for changed nodes.
func stepNeeding(s *state, c call, out Output, stepc func(*state) []*state) []*state {
	res := stepc(s)
	if len(res) > 0 || len(s.pending) == 0 {
		return res
	}
	for _, n := range takeEffect(s, c, out) {
		res = append(res, stepc(n)...)
	}
	return res
}

// takeEffect returns the states that s may be in once the pending
// publishes that c needs have taken effect.
func takeEffect(s *state, c call, out Output) []*state {
	take := func(from *state, p pend) *state {
		n := from.clone()
		n.put(p.id, rec{value: p.value})
		if n.pending[p]--; n.pending[p] == 0 {
			delete(n.pending, p)
		}
		return n
	}
	var res []*state
	switch {
	case (c.Kind == KindList || c.Kind == KindRecordsEvent) && out.Outcome == OK:
		n := s
		for _, r := range out.Records {
			if r.Value == nil {
				continue // a deletion needs no record
			}
			if m, ok := s.records[r.ID]; ok && m.value == string(r.Value) && m.modRev <= out.Rev {
				continue
			}
			p := pend{r.ID, string(r.Value)}
			if slices.Contains(out.Held, r.ID) && s.ghosts[p] {
				continue // held after its deletion: needs no record now
			}
			if n.pending[pend{r.ID, string(r.Value)}] == 0 && n.records[r.ID].value == string(r.Value) {
				continue // taken effect already, for an earlier change of the batch
			}
			if n.pending[p] == 0 {
				return nil
			}
			n = take(n, p)
		}
		if n != s {
			res = append(res, n.freeze())
		}
	case c.Kind == KindPublish && out.Outcome == Held, c.Kind == KindKeepAlive && c.Lease == 0:
		for _, p := range sortedPending(s.pending) {
			if p.id == c.ID {
				res = append(res, take(s, p).freeze())
			}
		}
	case c.Kind == KindWrite && out.Outcome == NodesChanged:
		for _, p := range sortedPending(s.pending) {
			res = append(res, take(s, p).freeze())
		}
	}
	return res
}

// refuse returns s with guarded token tok known to have ended.
func refuse(s *state, tok uint64) *state {
	if slices.Contains(s.dead, tok) {
		return s
	}
	n := s.clone()
	n.dead = append(n.dead, tok)
	slices.Sort(n.dead)
	return n.freeze()
}

// stepWrite is step for a status write: fenced by the term, and when
// nodesRev > 0 conditioned on no existing record newer than nodesRev.
func stepWrite(s *state, in Input, out Output) []*state {
	holds := s.termHolds(in, false)
	known, maybe := false, false
	if in.NodesRev > 0 {
		known, maybe = s.newer(in.NodesRev)
	}
	// applied is the state after the write succeeded: every record known
	// to be newer than nodesRev must have expired before it.
	applied := func() *state {
		n := s.clone()
		for id, r := range n.records {
			if in.NodesRev > 0 && r.modRev > in.NodesRev {
				n.remove(id)
			}
		}
		n.setStatus(in.Value, true)
		n.marked = false // validated, or written unconditioned: it stands
		if in.Guarded {
			n.high = max(n.high, in.Token)
		}
		return n.freeze()
	}
	switch out.Outcome {
	case OK:
		if !holds {
			return nil
		}
		return []*state{applied()}
	case Lost:
		if in.Guarded {
			return []*state{refuse(s, in.Token)}
		}
		if holds {
			return nil
		}
		return []*state{s}
	case NodesChanged:
		// The term is checked first: a refused term is reported as such.
		if !holds || !(known || maybe) {
			return nil
		}
		return []*state{s}
	case Unknown:
		if holds {
			return []*state{s, applied()}
		}
		return []*state{s}
	}
	return nil
}

// setStatus changes the status, after every revision reported so far.
func (s *state) setStatus(value string, exists bool) {
	s.status, s.exists = value, exists
}

// undo puts back the status an unvalidated write replaced.
func (s *state) undo() {
	if s.marked {
		s.setStatus(s.markPrev, s.markPrevExists)
		s.marked, s.markPrev, s.markPrevExists, s.markBy = false, "", false, 0
	}
}

// part is the half of an operation a call stands for.
type part uint8

const (
	whole  part = iota
	apply       // a tentative write's apply: it may show
	settle      // a tentative write's outcome: validated, undone or refused
	enable      // an open publish's call: it may take effect from then on
)

// call is what the model steps on: an operation, or one half of a
// tentative write, identified by its index in the history.
type call struct {
	Input
	id   int
	part part
}

// tentative reports whether an operation is checked as two halves: a
// status write conditioned on the records, of a term fenced by its token,
// on a store that validates after writing (Input.Tentative), that did not
// succeed. The store applied it (if the term held) and then undid it, or
// may still undo it: readers between its call and its return (any time
// after, if its outcome is unknown) may have seen it.
func tentative(in Input, out Output) bool {
	return in.Kind == KindWrite && in.Tentative && !in.Guarded && in.NodesRev > 0 && out.Outcome != OK
}

// stepApply is the first half of a tentative write: it applies the value
// if the term holds, marked unvalidated, or does nothing (a refused term,
// or a write that failed before it reached the store). If its second half
// came first, it does nothing.
func stepApply(s *state, c call) []*state {
	if s.halves[c.id] == halfSettled {
		n := s.clone()
		delete(n.halves, c.id)
		return []*state{n.freeze()}
	}
	none := s.clone()
	none.halves[c.id] = halfApplied
	res := []*state{none.freeze()}
	if s.termHolds(c.Input, false) {
		n := s.clone()
		n.halves[c.id] = halfApplied
		if !n.marked {
			// A mark already there (an earlier unvalidated write of the
			// term) keeps the status from before both.
			n.marked, n.markPrev, n.markPrevExists = true, s.status, s.exists
		}
		n.markBy = c.id
		n.setStatus(c.Value, true)
		res = append(res, n.freeze())
	}
	return res
}

// stepSettle is the second half of a tentative write: the outcome the
// caller saw. A refusal undoes the write if it is still the status'
// newest (the store's undo is conditioned on it); an unknown outcome may
// also have validated it, or left it marked.
func stepSettle(s *state, c call, out Output) []*state {
	n := s.clone()
	if s.halves[c.id] == halfApplied {
		delete(n.halves, c.id)
	} else {
		n.halves[c.id] = halfSettled
	}
	ours := s.marked && s.markBy == c.id
	holds := s.termHolds(c.Input, false)
	switch out.Outcome {
	case NodesChanged:
		// A record newer than nodesRev (or of unknown revision) showed,
		// unless a later term fenced meanwhile (and undid the write).
		if known, maybe := s.newer(c.NodesRev); holds && !known && !maybe {
			return nil
		}
		if ours {
			n.undo()
		}
		return []*state{n.freeze()}
	case Lost:
		if holds {
			return nil
		}
		if ours {
			n.undo()
		}
		return []*state{n.freeze()}
	case Unknown:
		res := []*state{n.freeze()} // left as it is, marked or not applied
		if ours {
			undone := n.clone()
			undone.undo()
			kept := n.clone()
			kept.marked, kept.markPrev, kept.markPrevExists, kept.markBy = false, "", false, 0
			res = append(res, undone.freeze(), kept.freeze())
		}
		return res
	}
	return nil
}

// Model is the porcupine model of a versiongate.Store's observable
// semantics, over the Input and Output of the Recorder's operations; the
// package documentation says what it checks and what it does not.
func Model() porcupine.Model {
	nm := porcupine.NondeterministicModel{
		Init: func() []interface{} {
			return []interface{}{(&state{records: map[string]rec{}, halves: map[int]byte{}, pending: map[pend]int{}}).freeze()}
		},
		Step: func(st, in, out interface{}) []interface{} {
			var next []*state
			switch c := in.(call); c.part {
			case apply:
				next = stepApply(st.(*state), c)
			case enable:
				next = stepEnable(st.(*state), c)
			case settle:
				next = stepNeeding(st.(*state), c, out.(Output), func(s *state) []*state { return stepSettle(s, c, out.(Output)) })
			default:
				next = stepNeeding(st.(*state), c, out.(Output), func(s *state) []*state { return step(s, c.Input, out.(Output)) })
			}
			res := make([]interface{}, len(next))
			for i, n := range next {
				res[i] = n
			}
			return res
		},
		Equal: func(a, b interface{}) bool { return a.(*state).key == b.(*state).key },
		Hash: func(st interface{}) uint64 {
			h := fnv.New64a()
			h.Write([]byte(st.(*state).key))
			return h.Sum64()
		},
		DescribeOperation: func(in, out interface{}) string {
			c := in.(call)
			d := describe(c.Input, out.(Output))
			switch c.part {
			case apply:
				d = "apply of " + d
			case settle:
				d = "outcome of " + d
			case enable:
				d = "call of " + d + ": may take effect from here"
			}
			return d
		},
		DescribeState: func(st interface{}) string { return st.(*state).describe() },
	}
	m := nm.ToModel()
	stepSet := m.StepContext
	m.StepContext = func(ctx context.Context, st, in, out interface{}) (bool, interface{}) {
		ok, next := stepSet(ctx, st, in, out)
		if ok {
			next = prune(next.([]interface{}))
		}
		return ok, next
	}
	m.Step = func(st, in, out interface{}) (bool, interface{}) {
		return m.StepContext(context.Background(), st, in, out)
	}
	return m
}

// prune drops from a set of states those another state of the set
// dominates: the same but for fewer pending publishes of some record and
// no more of any. Whatever a state can go on to do, one with more pending
// can too, since pending publishes only take effect where an operation
// could not step without them.
func prune(set []interface{}) []interface{} {
	if len(set) < 2 {
		return set
	}
	dominates := func(a, b *state) bool {
		if a.base != b.base || a.key == b.key {
			return false
		}
		for p, n := range b.pending {
			if a.pending[p] < n {
				return false
			}
		}
		return true
	}
	kept := set[:0:0]
	for i, x := range set {
		dominated := false
		for j, y := range set {
			if i != j && dominates(y.(*state), x.(*state)) {
				dominated = true
				break
			}
		}
		if !dominated {
			kept = append(kept, x)
		}
	}
	return kept
}

// operations converts a history for porcupine, a tentative write as two
// operations spanning the same interval, and an open publish as the point
// from which it may take effect (see resolveOpen).
func operations(history []Op) (ops []porcupine.Operation, contradicted bool) {
	history, enables := resolveOpen(history)
	ops = make([]porcupine.Operation, 0, len(history))
	for i, o := range history {
		if o.Input.Kind == KindWatchEnd && o.Output.Outcome != TooOld {
			continue // told nothing the model checks
		}
		parts := []part{whole}
		switch {
		case enables[i]:
			parts = []part{enable}
		case tentative(o.Input, o.Output):
			parts = []part{apply, settle}
		}
		for _, p := range parts {
			ops = append(ops, porcupine.Operation{ClientId: o.Client, Input: call{Input: o.Input, id: i, part: p}, Call: int64(o.Call), Output: o.Output, Return: int64(o.Return)})
		}
	}
	return narrow(mergeEvents(ops))
}

// mergeEvents makes one operation of the status events that show the
// same status at the same revision (every waiting node's watch delivers
// each change), and of the records batches that show the same changes at
// the same revision (every node's record watch), over the intersection
// of their intervals, when they intersect. Such events show the store at one revision, which it
// held from the change that made it until the next: that span begins
// after each event's call (the change came after the revision each
// watch started from was reported) and before its delivery, so a correct
// store's events have a common point, and the step of the one is the step
// of each (the first checks and sets the revision, the others then
// change nothing). A merged batch is checked from the lowest of the
// watches' positions for skipped records and from the highest for
// replayed ones, as each is on its own. A dozen such events at once, each
// placed on its own, left a rolling history of 800 operations undecided
// after 70s, and a joiners history of 350 with 110 batches.
func mergeEvents(ops []porcupine.Operation) []porcupine.Operation {
	type key struct {
		kind   Kind
		rev    int64
		value  string
		exists bool
	}
	first := map[key]int{}
	out := make([]porcupine.Operation, 0, len(ops))
	for _, op := range ops {
		c, o := op.Input.(call), op.Output.(Output)
		if (c.Kind != KindStatusEvent && c.Kind != KindRecordsEvent) || c.part != whole {
			out = append(out, op)
			continue
		}
		k := key{c.Kind, o.Rev, o.Value, o.Exists}
		if c.Kind == KindRecordsEvent {
			k.value = batchKey(o.Records)
		}
		if i, ok := first[k]; ok {
			lo, hi := max(out[i].Call, op.Call), min(out[i].Return, op.Return)
			if mc := out[i].Input.(call); lo < hi {
				if c.Kind == KindStatusEvent {
					// Each must come after its own watch's position:
					// after the highest of them.
					mc.From = max(mc.From, c.From)
				} else {
					mc.CreatedAfter = max(mc.From, mc.CreatedAfter, c.From, c.CreatedAfter)
					mc.From = min(mc.From, c.From)
				}
				out[i].Input, out[i].Call, out[i].Return = mc, lo, hi
				continue
			}
		}
		first[k] = len(out)
		out = append(out, op)
	}
	return out
}

// batchKey identifies a batch's changes, in order.
func batchKey(recs []versiongate.Record) string {
	var b strings.Builder
	for _, r := range recs {
		fmt.Fprintf(&b, "%q=%t:%q;", r.ID, r.Value != nil, r.Value)
	}
	return b.String()
}

// narrow shortens the intervals of the operations that report a
// revision, by what the model requires of their order, so that the search
// tries them in that order instead of backtracking over every ordering of
// the operations around them (many joiners publishing and deleting at
// once made a history of 150 operations undecided after minutes). It
// reports contradicted, with the intervals as recorded, when the order
// the model requires contradicts the real-time order: then no
// linearization exists.
//
// The model orders them by revision: a publish needs a revision above
// every one reported before it (by a publish, a listing or a read), a
// listing or a read one at least as high. So if X is a publish and Y
// reports a revision at least X's, or X a listing or a read and Y reports
// a higher one, X precedes Y, and each interval can lose what lies on the
// wrong side of the other: Y cannot take effect before X was called, nor
// X after Y returned. (Reads took part only as Y until their revision was
// checked; as X they let a joiners history of 148 operations, 40 of them
// reads, be decided at once instead of in 16 s.) No linearization the model accepts is lost. If the narrowed
// intervals contradict the real-time order (call after return), the
// history cannot be linearized, and the search is left to find that on
// the intervals as recorded.
func narrow(ops []porcupine.Operation) ([]porcupine.Operation, bool) {
	type revved struct {
		i     int
		rev   int64
		check byte // 'p': needs a higher revision; 'l' (a listing or a read): at least as high
	}
	var rs []revved
	for i, op := range ops {
		c, out := op.Input.(call), op.Output.(Output)
		if c.part != whole || out.Outcome != OK {
			continue
		}
		switch c.Kind {
		case KindPublish:
			rs = append(rs, revved{i, out.Rev, 'p'})
		case KindList:
			rs = append(rs, revved{i, out.Rev, 'l'})
		case KindRead, KindRecordsEvent, KindStatusEvent:
			// A read's revision is held to the listing's rule: at
			// least every revision reported before it; so is a watch
			// event's, at the point it was current.
			rs = append(rs, revved{i, out.Rev, 'l'})
		}
	}
	// In revision order, publishes first at a revision ('l' < 'p' would
	// not do: a publish precedes what reports its revision).
	rank := map[byte]int{'p': 0, 'l': 1}
	slices.SortStableFunc(rs, func(a, b revved) int {
		if a.rev != b.rev {
			return cmp.Compare(a.rev, b.rev)
		}
		return rank[a.check] - rank[b.check]
	})
	// precedes reports whether the model puts x before y.
	precedes := func(x, y revved) bool {
		return x.check == 'p' && y.rev >= x.rev || x.check != 'p' && y.rev > x.rev
	}
	calls := make([]int64, len(ops))
	rets := make([]int64, len(ops))
	for i, op := range ops {
		calls[i], rets[i] = op.Call, op.Return
	}
	// before notes that the model puts x before y, and narrows both by
	// it; relax (below) narrows again by every such pair until none
	// narrows more, since a pair noted late may narrow an operation
	// whose bounds an earlier pair was computed from.
	var pairs [][2]int
	before := func(x, y int) {
		pairs = append(pairs, [2]int{x, y})
		calls[y] = max(calls[y], calls[x]+1)
		rets[x] = min(rets[x], rets[y]-1)
	}
	// Each call moves after the narrowed calls of what precedes it, and
	// each return before the narrowed returns of what follows it, so that
	// the calls are in the model's order, never tied.
	for b, y := range rs {
		for _, x := range rs[:b] {
			if precedes(x, y) {
				before(x.i, y.i)
			}
		}
	}
	for a := len(rs) - 1; a >= 0; a-- {
		x := rs[a]
		for _, y := range rs[a+1:] {
			if precedes(x, y) {
				rets[x.i] = min(rets[x.i], rets[y.i]-1)
			}
		}
	}
	// A record published once and deleted after that publish returned is
	// gone for good once the delete takes effect: every operation that
	// shows it (a listing that lists it, a keep-alive that held it, a
	// watch's batch that shows it created) precedes the delete.
	type pubDel struct {
		pubs []int
		dels []int
		// gone: the watches' batches that leave the ID deleted.
		gone []int
	}
	byID := map[string]*pubDel{}
	at := func(id string) *pubDel {
		if byID[id] == nil {
			byID[id] = &pubDel{}
		}
		return byID[id]
	}
	for i, op := range ops {
		c, out := op.Input.(call), op.Output.(Output)
		switch {
		case c.Kind == KindPublish: // an open one's enable too: it may make the record
			at(c.ID).pubs = append(at(c.ID).pubs, i)
		case c.part != whole:
		case c.Kind == KindDelete && out.Outcome == OK:
			at(c.ID).dels = append(at(c.ID).dels, i)
		case c.Kind == KindRecordsEvent && out.Outcome == OK:
			last := map[string]bool{}
			for _, r := range out.Records {
				last[r.ID] = r.Value != nil
			}
			for id, created := range last {
				if !created {
					at(id).gone = append(at(id).gone, i)
				}
			}
		}
	}
	for i, op := range ops {
		c, out := op.Input.(call), op.Output.(Output)
		if c.part != whole || out.Outcome != OK {
			continue
		}
		var shown []string
		switch c.Kind {
		case KindList:
			for _, r := range out.Records {
				if !slices.Contains(out.Held, r.ID) { // a held one is listed after its deletion
					shown = append(shown, r.ID)
				}
			}
		case KindKeepAlive:
			shown = []string{c.ID}
		case KindRecordsEvent:
			// A batch shows the records it leaves created, at a point
			// where they exist (see stepRecordsEvent); not one it also
			// shows deleted.
			last := map[string]bool{}
			for _, r := range out.Records {
				last[r.ID] = r.Value != nil
			}
			for id, created := range last {
				if created {
					shown = append(shown, id)
				}
			}
		}
		for _, id := range shown {
			pd := byID[id]
			if pd == nil || len(pd.pubs) != 1 {
				continue
			}
			p := ops[pd.pubs[0]]
			pout := p.Output.(Output)
			if pout.Outcome != OK {
				continue
			}
			for _, d := range pd.dels {
				dc := ops[d].Input.(call)
				if dc.Lease != pout.Lease || ops[d].Call <= p.Return {
					continue
				}
				before(i, d)
			}
			// So is a batch that shows it deleted at the publish's
			// revision or later: the batch follows the publish (by
			// revision), removes the record (of known revision, the
			// publish's), and nothing makes it again. A batch below the
			// publish's revision shows an earlier record of the ID
			// deleted, and may come before the publish
			// (TestEarlierRecordDeletedBeforePublish). Keep-alives of
			// records that batches showed deleted, placed after them,
			// left a joiners history of 524 operations on the
			// Kubernetes store undecided for minutes
			// (testdata/joiners-keepalives.json).
			for _, g := range pd.gone {
				if g == i || ops[g].Output.(Output).Rev < pout.Rev {
					continue
				}
				before(i, g)
			}
		}
	}
	// A refused tentative write's value, read (or delivered by a status
	// watch) where no other write of the same value may have come before,
	// was applied by that write before the read and not yet undone: its
	// apply precedes the read and its outcome follows it. The value shows
	// from the apply until the status changes (the outcome's undo,
	// another write, a later term's fence), and only another write of it
	// could show it again. So what shows another status at a revision
	// below the read's, and so precedes the read, precedes the apply too.
	// Placed anywhere in their interval, the two halves of one write
	// refused after 430 ms, whose value two reads showed amid 37 joiners'
	// publishes, deletes and 150 watch batches, left a history of 395
	// operations undecided for good: the search applied the write early,
	// and found a read of its value out of place only after trying every
	// order of the operations in between.
	for w, op := range ops {
		c := op.Input.(call)
		if c.part != apply {
			continue
		}
		s := -1 // the settle half
		for j, o := range ops {
			if oc := o.Input.(call); oc.part == settle && oc.id == c.id {
				s = j
			}
		}
		if s < 0 || ops[s].Output.(Output).Outcome == Unknown {
			continue
		}
		for r, ro := range ops {
			rc, rout := ro.Input.(call), ro.Output.(Output)
			if rc.part != whole || (rc.Kind != KindRead && rc.Kind != KindStatusEvent) || rout.Outcome != OK || !rout.Exists || rout.Value != c.Value {
				continue
			}
			if slices.ContainsFunc(ops, func(o porcupine.Operation) bool {
				oc, oout := o.Input.(call), o.Output.(Output)
				if oc.Kind != KindWrite || oc.id == c.id || oc.Value != c.Value || o.Call >= ro.Return {
					return false
				}
				// Another refused tentative write of the value that
				// returned before the read was called shows it no
				// more: see refusedBefore.
				return !refusedBefore(oc.Input, oout, o.Return, ro.Call)
			}) {
				continue // another write of the value may have shown it
			}
			before(w, r)
			before(r, s)
			// What shows another status at a lower revision precedes
			// the read, and so the apply: the value, once replaced,
			// does not come back.
			for p, po := range ops {
				pc, pout := po.Input.(call), po.Output.(Output)
				if pc.part != whole || (pc.Kind != KindRead && pc.Kind != KindStatusEvent) || pout.Outcome != OK || pout.Rev >= rout.Rev {
					continue
				}
				if pout.Exists && pout.Value == c.Value {
					continue
				}
				before(p, w)
			}
		}
	}
	relax(pairs, calls, rets)
	out := slices.Clone(ops)
	for i := range out {
		if calls[i] >= rets[i] {
			return ops, true
		}
		out[i].Call, out[i].Return = calls[i], rets[i]
	}
	return out, false
}

// refusedBefore reports whether a status write cannot be what shows its
// value at a point after t: a tentative write refused (for changed
// records, or its term lost; not of unknown outcome) that returned at ret,
// before t. Its outcome is linearized before its return, so before t.
// Once applied, its value stands only as long as its own mark does
// (marked, markBy the write): another write's apply moves the mark to
// that write, a successful write puts its own value, and an undo (a
// refusal's, a later term's fence) puts back the status from before the
// mark was made. That status is never this write's own: a mark is made
// over an unmarked status, and this write's value stands unmarked only
// if its own outcome kept it, which only an unknown outcome does. Its
// refusal undoes its mark if the mark is still its own, and an apply
// linearized after the outcome does nothing (stepApply, stepSettle). So
// after t its value shows only where another write of the value put it,
// and which write that was is decided among the others: no linearization
// the model accepts is lost. Two tentative writes of the same restricted
// status, the first refused 330 ms before the second was called, kept
// every read of the second's value from placing the second's halves
// around it, and a joiners history of 338 operations stayed undecided for
// minutes (testdata/undecided-nodelease-joiners-338ops.json).
func refusedBefore(in Input, out Output, ret int64, t int64) bool {
	return tentative(in, out) && out.Outcome != Unknown && ret < t
}

// relax narrows calls and rets by every pair (x before y: y's call after
// x's, x's return before y's) until no pair narrows more, or an interval
// is empty (the order contradicts the real-time order, which narrow
// reports). Each round that narrows moves some bound by at least one, and
// the pairs of a consistent order form no cycle, so rounds are bounded by
// the number of operations; more means a cycle, whose intervals empty.
func relax(pairs [][2]int, calls, rets []int64) {
	for range len(calls) + 1 {
		changed := false
		for _, p := range pairs {
			x, y := p[0], p[1]
			if c := calls[x] + 1; c > calls[y] {
				calls[y], changed = c, true
			}
			if r := rets[y] - 1; r < rets[x] {
				rets[x], changed = r, true
			}
			if calls[y] >= rets[y] || calls[x] >= rets[x] {
				return
			}
		}
		if !changed {
			return
		}
	}
}

// CheckTimeout bounds Check's first search. A history it cannot decide in
// that time is searched again for RetryTimeout, and one still undecided
// then fails the test: histories the drivers produce are decided in well
// under a second, or, with many operations of unknown outcome, sometimes
// not in minutes, and a check that cannot see a violation proves nothing.
// The search runs without the race detector (see Verify), 3.5 to 5 times
// faster than with it (measured on the proofs' histories), so these 10
// seconds search more than the 30 seconds in a race-enabled test binary
// did.
const CheckTimeout = 10 * time.Second

// RetryTimeout bounds Check's second search of a history the first left
// undecided.
const RetryTimeout = 60 * time.Second

// Verify checks history against the model, searching for at most
// CheckTimeout. It returns porcupine's result and, when the history is not
// linearizable, the path of an HTML visualization written into dir,
// beside the history as text (history.txt, one operation a line) and as
// the checker program reads it (history.json). In a binary built with the
// race detector, a history of more than childOps operations is checked in
// a program built without it (verifyInChild), except under -short, whose
// histories (kept ones, no proof's) are decided in this process rather than
// after a build of that program, which takes a minute on a starved machine
// with a cold build cache.
func Verify(history []Op, dir string) (porcupine.CheckResult, string, error) {
	return verifyWithin(history, dir, CheckTimeout)
}

// verifyWithin is Verify with a search bounded by timeout.
func verifyWithin(history []Op, dir string, timeout time.Duration) (porcupine.CheckResult, string, error) {
	if raceEnabled && len(history) > childOps && !testing.Short() {
		return verifyInChild(history, dir, timeout)
	}
	return verifyHere(history, dir, timeout)
}

// contradictedSearch bounds the search of a history whose revisions
// already contradict its real-time order: it only draws the
// visualization, and the verdict is known before it starts. Every
// rejected history of the joiners' drivers and of the saved histories'
// tests is so contradicted, and used to spend 2 s each here.
const contradictedSearch = 500 * time.Millisecond

// childOps is the size above which a race-enabled binary checks a history
// in a plain child: smaller ones are decided in milliseconds even with the
// race detector, less than building the child takes.
const childOps = 50

// verifyHere is Verify in this process.
func verifyHere(history []Op, dir string, timeout time.Duration) (porcupine.CheckResult, string, error) {
	model := Model()
	ops, contradicted := operations(history)
	if contradicted {
		// Illegal whatever the search finds in its time: the order the
		// model requires of the revisions contradicts the real-time
		// order (see narrow). The search on the intervals as recorded
		// only draws the visualization, which shows the operations that
		// could not be placed; it is kept short, since such a history
		// can take long to exhaust.
		timeout = min(timeout, contradictedSearch)
	}
	res, info := porcupine.CheckOperationsVerbose(model, ops, timeout)
	if contradicted {
		res = porcupine.Illegal
	}
	if res == porcupine.Unknown {
		// Kept, so that a search that ran out of time can be run again
		// for longer, or studied: undecided-*.json beside the others.
		if req, err := json.Marshal(ChildRequest{History: history, Dir: dir}); err == nil {
			if f, err := os.CreateTemp(dir, "undecided-*.json"); err == nil {
				_, werr := f.Write(req)
				if cerr := f.Close(); werr == nil {
					werr = cerr
				}
				if werr != nil {
					return res, "", werr
				}
			}
		}
	}
	if res != porcupine.Illegal {
		return res, "", nil
	}
	path := filepath.Join(dir, "linearizability.html")
	if err := os.WriteFile(filepath.Join(dir, "history.txt"), []byte(dump(history)), 0o644); err != nil {
		return res, "", err
	}
	// The history as the checker program reads it, to check it again:
	// go run ./versiongate/internal/storecheck/verifyhistory < history.json
	if req, err := json.Marshal(ChildRequest{History: history, Dir: dir}); err == nil {
		if err := os.WriteFile(filepath.Join(dir, "history.json"), req, 0o644); err != nil {
			return res, "", err
		}
	}
	f, err := os.Create(path)
	if err != nil {
		return res, "", err
	}
	defer f.Close()
	if err := porcupine.Visualize(model, info, f); err != nil {
		return res, "", err
	}
	return res, path, f.Close()
}

// Check fails t unless history is linearizable with respect to the model,
// logging the path of porcupine's visualization when it is not: in the
// directory $STORECHECK_DIR if set (kept after the test), else in
// t.TempDir(). A history the search leaves undecided within CheckTimeout
// is searched again for RetryTimeout; still undecided, it fails t: a
// check that could not look is no proof (TestUndecidedHistoryFails).
func Check(t testing.TB, history []Op) {
	t.Helper()
	check(t, history, CheckTimeout, RetryTimeout, verifyWithin)
}

// check is Check with the searches' bounds and the search itself given.
func check(t testing.TB, history []Op, first, retry time.Duration, verify func([]Op, string, time.Duration) (porcupine.CheckResult, string, error)) {
	t.Helper()
	start := time.Now()
	dir := os.Getenv("STORECHECK_DIR")
	if dir == "" {
		// Not t.TempDir, which goes with the test: a history that fails
		// the check is kept for study, one that passes is removed.
		tmp, err := os.MkdirTemp("", "storecheck-")
		if err != nil {
			t.Errorf("storecheck: %v", err)
			tmp = t.TempDir()
		}
		dir = tmp
		defer func() {
			if !t.Failed() {
				os.RemoveAll(tmp)
			}
		}()
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Errorf("storecheck: STORECHECK_DIR: %v", err)
		dir = t.TempDir()
	}
	res, path, err := verify(history, dir, first)
	if err == nil && res == porcupine.Unknown {
		t.Logf("storecheck: linearizability of %d operations undecided after %v; searching again for %v", len(history), first, retry)
		res, path, err = verify(history, dir, retry)
	}
	switch {
	case err != nil:
		t.Errorf("storecheck: %d operations not linearizable; visualization failed: %v", len(history), err)
	case res == porcupine.Illegal:
		t.Errorf("storecheck: %d operations not linearizable against the store model; visualization: %s", len(history), path)
	case res == porcupine.Unknown:
		t.Errorf("storecheck: linearizability of %d operations UNDECIDED after %v and %v more: the check could not look, so it proves nothing (the history is kept in %s as undecided-*.json; go run ./versiongate/internal/storecheck/verifyhistory < it searches again)", len(history), first, retry, dir)
	default:
		t.Logf("storecheck: %d operations linearizable (checked in %v)", len(history), time.Since(start).Round(time.Millisecond))
	}
}

// dump renders history one operation a line: call and return times,
// client, operation and outcome.
func dump(history []Op) string {
	var b strings.Builder
	for _, o := range history {
		ret := "open"
		if o.Return != Open {
			ret = o.Return.String()
		}
		fmt.Fprintf(&b, "%v\t%s\t%s\t%s\n", o.Call, ret, o.Name, o)
		if o.Output.Err != "" {
			fmt.Fprintf(&b, "\t\t\terror: %s\n", o.Output.Err)
		}
	}
	return b.String()
}
