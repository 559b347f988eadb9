package backoff

import (
	"fmt"
	"math"
	"time"

	"github.com/reconkit/reconkit/internal/jitter"
)

// Renewal is the pace of the retries of a renewal that must succeed before
// a deadline: a lease's, a term's, a record's. [Renewal.Pause] gives the
// pause after the n-th failure in a row; the caller waits it (on its own
// clock) and tries again, and starts again from n = 1 after a success.
//
// The unjittered pause w starts at Initial and grows by Multiplier after
// each further failure, up to Max. The pause is drawn uniformly from
// [w, w×(1+Jitter)], so that agents whose renewals one outage failed
// together retry apart, and none retries sooner than w.
//
// A pause that would start the next try later than Reserve before the
// deadline is brought forward to start it before then: it is drawn from
// the last third of the time to that instant, so that the last try is not
// needlessly late and agents do not make it together. A pause is brought
// forward only so far: never below Initial, nor below MinShortened × w
// (at most MinShortenedCap, when that is positive), so that tries never
// come faster than the caller's first pace and do not crowd towards the
// deadline. When no such try fits, Pause returns the unshortened pause or
// the time left, whichever is longer: the deadline comes first.
//
// The zero value is not useful; set at least Initial. Pause never panics:
// values that [Renewal.Validate] refuses are clamped as each field says.
type Renewal struct {
	// Initial is the unjittered pause after the first failure, and the
	// least pause Pause returns. Below a millisecond counts as a
	// millisecond, so that no loop on it spins.
	Initial time.Duration
	// Multiplier grows the unjittered pause after each further failure
	// (1.5: by half). Below 1, or NaN, counts as 1: a fixed pace.
	Multiplier float64
	// Max caps the unjittered pause; zero or less means no cap (the
	// pause still stops growing long before a time.Duration overflows).
	Max time.Duration
	// Jitter spreads each pause over [w, w×(1+Jitter)]. Below 0, or NaN,
	// counts as 0; above 1 as 1.
	Jitter float64
	// Reserve is how long before the deadline the last try should start,
	// so that it can complete in time. Below 0 counts as 0.
	Reserve time.Duration
	// MinShortened bounds how far a pause is brought forward, as a
	// fraction of the unjittered pause: a shortened pause is never below
	// MinShortened × w (nor below Initial). Below 0, or NaN, counts as 0;
	// above 1 as 1.
	MinShortened float64
	// MinShortenedCap, when positive, caps the bound MinShortened × w.
	MinShortenedCap time.Duration
	// Rand draws the jitter, uniformly in [0, 1); nil means
	// math/rand/v2's Float64. A caller that wants reproducible pauses (a
	// test, an example) sets it, for example to the Float64 method of a
	// seeded *rand.Rand; Pause calls it from the caller's goroutine, so a
	// Renewal shared between goroutines needs a Rand safe for that.
	// Values outside [0, 1) are clamped into it.
	Rand func() float64
}

// maxRenewalPause bounds every pause Renewal computes, far below the
// largest time.Duration, so that growth and jitter never overflow.
const maxRenewalPause = time.Duration(1 << 60)

// Validate reports, wrapping [ErrInvalidOption], the fields of r out of
// the ranges its documentation gives. Pause works whatever they are.
func (r Renewal) Validate() error {
	switch {
	case r.Initial < time.Millisecond:
		return fmt.Errorf("%w: Renewal.Initial %v is below a millisecond", ErrInvalidOption, r.Initial)
	case !(r.Multiplier >= 1):
		return fmt.Errorf("%w: Renewal.Multiplier %v is below 1", ErrInvalidOption, r.Multiplier)
	case !(r.Jitter >= 0 && r.Jitter <= 1):
		return fmt.Errorf("%w: Renewal.Jitter %v is outside [0, 1]", ErrInvalidOption, r.Jitter)
	case r.Reserve < 0:
		return fmt.Errorf("%w: Renewal.Reserve %v is negative", ErrInvalidOption, r.Reserve)
	case !(r.MinShortened >= 0 && r.MinShortened <= 1):
		return fmt.Errorf("%w: Renewal.MinShortened %v is outside [0, 1]", ErrInvalidOption, r.MinShortened)
	}
	return nil
}

// Pause is the pause after the n-th failed try in a row (n from 1), when
// left is the time from now to the deadline (it may be negative: the
// deadline has passed). See [Renewal] for how it is drawn.
func (r Renewal) Pause(n int, left time.Duration) time.Duration {
	w := r.unjittered(n)
	pause := w + r.draw(r.jitter()*float64(w))
	last := left - max(r.Reserve, 0)
	if pause <= last {
		return pause
	}
	bound := time.Duration(clamp01(r.MinShortened) * float64(w))
	if r.MinShortenedCap > 0 {
		bound = min(bound, r.MinShortenedCap)
	}
	floor := max(r.initial(), bound)
	if last < floor {
		return max(pause, left) // no try fits: the deadline comes first
	}
	lo := max(floor, last-last/3)
	return lo + r.draw(float64(last-lo))
}

// unjittered is the pause after the n-th failure before jitter: Initial
// grown n-1 times by Multiplier, at most Max and maxRenewalPause.
func (r Renewal) unjittered(n int) time.Duration {
	limit := maxRenewalPause
	if r.Max > 0 {
		limit = min(r.Max, limit)
	}
	w := r.initial()
	m := r.Multiplier
	if !(m > 1) { // below 1 or NaN: a fixed pace
		return min(w, limit)
	}
	g := float64(w) * math.Pow(m, float64(max(n, 1)-1))
	if !(g < float64(limit)) { // beyond the limit, or +Inf
		return limit
	}
	w = time.Duration(g)
	return min(w, limit)
}

// initial is Initial, at least a millisecond.
func (r Renewal) initial() time.Duration { return max(r.Initial, time.Millisecond) }

// jitter is Jitter clamped into [0, 1].
func (r Renewal) jitter() float64 { return clamp01(r.Jitter) }

// draw returns a duration drawn uniformly from [0, span).
func (r Renewal) draw(span float64) time.Duration {
	return time.Duration(jitter.Float64(r.Rand) * span)
}

// clamp01 is f clamped into [0, 1], NaN as 0.
func clamp01(f float64) float64 {
	if !(f > 0) {
		return 0
	}
	return min(f, 1)
}
