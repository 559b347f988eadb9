package storecheck

import "time"

// resolveOpen prepares the operations of unknown outcome (Return Open)
// for the search. An open operation may take effect at any time after its
// call, so the search tried each at every step after it: an apiserver
// restart leaves dozens of publishes open (a gate retries while the
// server is down), and the search backtracked over where each took effect
// until it gave up (rolling histories of 372, 462 and 544 operations
// undecided after 20 s, 60 s and 70 s; testdata/open-publishes.json).
//
// It returns the history without the open operations no linearization
// needs, and marks in enables the open publishes it keeps, which the
// model checks as pending (stepEnable, stepNeeding). Neither makes an
// illegal history pass. Dropping an operation of unknown outcome only
// removes linearizations: it may always have done nothing. A
// linearization with pending publishes is one of the history as
// recorded: each publish taken is placed just before the operation that
// took it, which comes after the publish's enable, and so after every
// operation that returned before the publish's call; each enable counts
// one publish, so none is taken twice; one never taken did nothing. What
// each step below must show is the converse, that every history the
// model accepted before is still accepted, so that a correct store's
// history is not rejected.
//
// Open delete. Its only effect is to remove a record, and no operation
// needs a record gone: a listing drops the records it does not show, a
// publish replaces one, and every other operation that looks at the
// records (a held publish, a keep-alive, a write refused for changed
// nodes) needs one there. A state with a record more accepts every step
// the state without it accepts, and still has at most that record more
// after it. So a linearization with the delete applied is one with the
// delete left out: it is dropped.
//
// Open publish of ID with value V. It makes the record (V, of unknown
// lease and revision). Until the record is replaced or removed (a publish
// of the ID, a listing that does not show it), only some operations can
// need it, its dependents: a listing that shows the ID with value V (the
// record there may have another value or too high a revision), a publish
// of the ID refused as held, a write refused for changed nodes (which a
// record of unknown revision may justify), a keep-alive of lease 0 (the
// unknown lease; never handed out). Every other operation accepted with
// the record there is accepted with the record of the ID as it would be
// without the publish, and the states after it differ in that record
// only. So a linearization where the publish takes effect is still one
// with the publish moved later, just before the first operation that
// cannot step without it, necessarily a dependent that may follow it
// (returned after its call), or left out if the record is replaced or
// removed first. The model checks it so: the publish becomes a point, the
// enable, from which it is pending (counted in the state by ID and value:
// open publishes of the same record are interchangeable), and an
// operation that cannot step takes the pending publishes it needs as
// having taken effect just before it (stepNeeding). A publish with no
// dependent that may follow it is dropped. The enable is called at the
// publish's call, or the first call of those dependents if later, and
// returns a nanosecond after. Take a linearization with the publish just
// before a dependent D. Every operation that returned before the
// publish's call precedes it, and so D; every one that returned before
// the dependents' first call precedes D; so all that returned before the
// enable's call precede D, and every operation called after the enable's
// return follows them all. So the enable fits just before D or before
// the first operation called after its return, whichever comes first;
// and an enable moved earlier keeps the linearization, since more pending
// publishes only allow more (a state with more pending steps wherever
// one with fewer does, and still has at least as many after). An enable
// with a longer interval was tried at every step up to its first use,
// and the search still gave up.
//
// Open fences and writes are left as they are: a fence or a write may
// refuse a later term's operations or change what a read shows, and the
// proofs' histories hold few of them.
func resolveOpen(history []Op) (resolved []Op, enables []bool) {
	resolved = make([]Op, 0, len(history))
	for i, o := range history {
		if o.Output.Outcome != Unknown || o.Return != Open {
			resolved = append(resolved, o)
			enables = append(enables, false)
			continue
		}
		switch o.Input.Kind {
		case KindDelete:
			continue
		case KindPublish:
			first, ok := firstDependent(history, i)
			if !ok {
				continue
			}
			o.Call = max(o.Call, first)
			o.Return = o.Call + 1
		}
		resolved = append(resolved, o)
		enables = append(enables, o.Input.Kind == KindPublish)
	}
	return resolved, enables
}

// firstDependent returns the first call of the operations that may
// follow the open publish history[i] (they returned after its call) and
// need the record it makes (see resolveOpen); ok is false if there are
// none.
func firstDependent(history []Op, i int) (first time.Duration, ok bool) {
	p := history[i]
	for j, x := range history {
		if j == i || x.Return < p.Call || !needsRecord(x, p.Input.ID, p.Input.Value) {
			continue
		}
		if !ok || x.Call < first {
			first, ok = x.Call, true
		}
	}
	return first, ok
}

// needsRecord reports whether x may be accepted with the record id of
// value value (of unknown lease and revision) in place, and not without
// it: whether x is a dependent of an open publish of that record.
func needsRecord(x Op, id, value string) bool {
	switch x.Input.Kind {
	case KindList, KindRecordsEvent: // a watch's batch shows what it creates
		if x.Output.Outcome != OK {
			return false
		}
		for _, r := range x.Output.Records {
			if r.ID == id && r.Value != nil && string(r.Value) == value {
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
