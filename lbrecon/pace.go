package lbrecon

import (
	"time"
)

// Pace: when a listing can next tell something new about the writes
// outstanding, from the declared lag and what earlier writes took; it
// spaces the polls of wait.go and the RequeueAfter of once.go. Tests:
// requeue_test.go, spin_test.go.

// expectShown returns when the outstanding writes can be expected to show in a
// listing, from what earlier writes took; zero when nothing is outstanding.
// Before any write was seen through, an ack's horizon (the declared
// ListLag after its call returned) is the guess: with a lag declared in
// time, no listing before it need show the write. Intents are left out:
// one the engine takes tokens for is sent again at the next pass, not
// waited for. Called with memMu held.
func (m *memory) expectShown() time.Time {
	var t time.Time
	expect := func(at time.Time, h horizon) time.Time {
		if m.writePace == 0 {
			return h.at // zero without a declared lag, or in flight
		}
		return at.Add(m.writePace)
	}
	for _, a := range m.acks() {
		if e := expect(a.at, a.horizon); !a.seen && e.After(t) {
			t = e
		}
	}
	// Before any deletion was seen through, the list lag learnt from
	// writes is the best guess.
	destroy := m.destroyPace
	if destroy == 0 {
		destroy = m.writePace
	}
	for _, d := range m.deletions {
		if e := d.at.Add(destroy); !d.gone && e.After(t) {
			t = e
		}
	}
	return t
}

// newestWrite returns when the most recent write no listing has confirmed
// yet was made, leaving out, when the lag is counted in listings
// (byCount), the acks and intents that the listings made so far
// (listings) cannot show yet: more listings, not more time, show them, so
// they are no reason to space the polls out. Called with memMu held.
func (m *memory) newestWrite(listings uint64, byCount bool) (time.Time, bool) {
	var t time.Time
	early := func(h horizon) bool { return byCount && h.n > listings }
	for _, a := range m.acks() {
		if !a.seen && !early(a.horizon) {
			t = later(t, a.at)
		}
	}
	for _, in := range m.intents {
		if !early(in.horizon) {
			t = later(t, in.at)
		}
	}
	for _, d := range m.deletions {
		if !d.gone {
			t = later(t, d.at)
		}
	}
	return t, !t.IsZero()
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
