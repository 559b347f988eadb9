package storecheck

import "time"

// resolveOpen returns history without the operations of unknown outcome
// that no linearization needs, and with each open publish that one may
// need confined to the interval where it is needed. An open operation may
// take effect at any time after its call, so the search tries it at every
// step after it: an apiserver restart leaves dozens of publishes open
// (each retry of a gate that could not reach the server), and the search
// backtracked over where each took effect until it gave up (histories of
// 462 and 544 operations undecided after minutes).
//
// Each step may only narrow the history, never widen it: an operation of
// unknown outcome may always have done nothing, so dropping it or
// shortening its interval can only remove linearizations, and never makes
// an illegal history pass. What each step must show is the converse: that
// it keeps one linearization of every history the model accepts, so that
// a correct store's history is not rejected.
//
//   - An open delete is dropped. Its only effect is to remove a record,
//     and no operation needs a record gone: a listing drops the records
//     it does not show, a publish replaces one, and every other operation
//     that looks at the records (a held publish, a keep-alive, a refusal
//     for changed nodes) needs one there. A state with a record more
//     accepts every step the state without it accepts, and after the step
//     still holds the other's records and the same rest: so a
//     linearization with the delete applied is still one with it left
//     out.
//   - An open publish of a record ID with value V makes the record (V,
//     of unknown lease and revision). Until an operation replaces or
//     removes it (a publish of the ID, a listing that does not show it),
//     only some operations need it, its dependents: a listing that shows
//     the ID with value V, a publish of the ID refused as held, a write
//     refused for changed nodes (which a record of unknown revision may
//     justify), and a keep-alive of lease 0 (an unknown lease, never
//     handed out). Every other operation accepted with the record there
//     is accepted with the record of the ID as it would be without the
//     publish, with only that record's state differing. So in a
//     linearization where the publish took effect, it can be moved later,
//     to just before the first dependent that follows it before the
//     record is replaced or removed, or left out if there is none. That
//     dependent can follow it only if it returned after the publish was
//     called; the publish then takes effect after the first call and
//     before the last return among those dependents, and the interval is
//     narrowed to that: every operation that returned before the
//     dependent's call precedes the dependent, and so the publish, and
//     every one called after the dependent returned follows both. A
//     publish with no such dependent is dropped.
//
// Open fences and writes are left as they are: a fence or a write may
// refuse a later term's operations or change what a read shows, and the
// proofs' histories hold few of them.
func resolveOpen(history []Op) []Op {
	out := make([]Op, 0, len(history))
	for i, o := range history {
		if o.Output.Outcome != Unknown || o.Return != Open {
			out = append(out, o)
			continue
		}
		switch o.Input.Kind {
		case KindDelete:
			continue
		case KindPublish:
			first, last, ok := dependents(history, i)
			if !ok {
				continue
			}
			o.Call = max(o.Call, first)
			o.Return = max(last, o.Call+1)
		}
		out = append(out, o)
	}
	return out
}

// dependents returns the earliest call and the latest return of the
// operations that may follow the open publish history[i] and need the
// record it makes (see resolveOpen); ok is false if there are none.
func dependents(history []Op, i int) (first, last time.Duration, ok bool) {
	p := history[i]
	for j, x := range history {
		if j == i || x.Return < p.Call || !needsRecord(x, p.Input.ID, p.Input.Value) {
			continue
		}
		if !ok {
			first, last, ok = x.Call, x.Return, true
			continue
		}
		first, last = min(first, x.Call), max(last, x.Return)
	}
	return first, last, ok
}

// needsRecord reports whether x may be accepted with record id of value
// value (of unknown lease and revision) in place, and not with it absent
// or different.
func needsRecord(x Op, id, value string) bool {
	switch x.Input.Kind {
	case KindList:
		if x.Output.Outcome != OK {
			return false
		}
		for _, r := range x.Output.Records {
			if r.ID == id && string(r.Value) == value {
				return true
			}
		}
	case KindPublish:
		return x.Output.Outcome == Held && x.Input.ID == id
	case KindWrite:
		return x.Output.Outcome == NodesChanged
	case KindKeepAlive:
		return x.Input.ID == id && x.Input.Lease == 0
	}
	return false
}
