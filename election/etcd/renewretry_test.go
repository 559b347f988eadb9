package etcd

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// These tests hold the pace of a term's renewal retries, renewRetry, as
// its documentation (and the package's) states it, for every n and for
// intervals from well below the first pause to an hour's TTL: they call
// renewRetry(...).Pause directly, with fixed draws, so every figure is
// exact and nothing depends on time. The tests through Leadership.keep on
// a real etcd are in renewpace_test.go.

// nearOne is the largest float64 below 1: the highest draw a Rand gives.
const nearOne = 1 - 0x1p-53

// renewDraws are the fixed draws every case runs with: the least, the
// middle and the highest.
var renewDraws = [...]float64{0, 0.5, nearOne}

// renewIntervals are the renewal intervals (TTL/3) the cases run with:
// below the 500 ms first pause (renewRetry promises them, although the
// elector's least SessionTTL, 2 s, gives 666 ms), at it, and those of
// 2 s, 3 s, the default 10 s, 60 s, 300 s and 3600 s TTLs.
var renewIntervals = [...]time.Duration{
	100 * time.Millisecond,
	333 * time.Millisecond,
	499 * time.Millisecond,
	500 * time.Millisecond,
	2 * time.Second / 3,
	time.Second,
	10 * time.Second / 3,
	20 * time.Second,
	100 * time.Second,
	20 * time.Minute,
}

// plenty is a validity left that no pause comes near: nothing is brought
// forward.
const plenty = 1000 * time.Hour

// fixedDraw is a Rand that always draws r.
func fixedDraw(r float64) func() float64 { return func() float64 { return r } }

// firstPause and reserve are the first pause and the reserve the
// documentation gives for interval: 500 ms, or the interval if shorter,
// and half of it.
func firstPause(interval time.Duration) time.Duration { return min(500*time.Millisecond, interval) }
func reserve(interval time.Duration) time.Duration    { return firstPause(interval) / 2 }

// paced is the documented pause after the n-th failure in a row, before
// anything is brought forward: the first pause grown by half n-1 times,
// capped at interval, plus r times a fifth of it. It is computed apart
// from backoff.Renewal, by repeated multiplication.
func paced(interval time.Duration, n int, r float64) time.Duration {
	w := float64(firstPause(interval))
	for i := 1; i < n && w < float64(interval); i++ {
		w *= 1.5
	}
	w = min(w, float64(interval))
	return time.Duration(w + r*w/5)
}

// requireNear fails unless got is want within 2 ns (the rounding of two
// ways of computing one float).
func requireNear(t *testing.T, want, got time.Duration, msg string, args ...any) {
	t.Helper()
	if d := got - want; d < -2 || d > 2 {
		require.Failf(t, "pause", "%s: got %v, want %v", fmt.Sprintf(msg, args...), got, want)
	}
}

// (a) No pause after a failed renewal exceeds the renewal interval (TTL/3)
// plus its jitter, a fifth of it at most: not for any n (up to where the
// growth would overflow without the cap), not for any draw, not for a
// pause that is brought forward. Removing Max: interval fails it first
// at the 100 ms interval's second pause (150 ms against 120 ms).
func TestRenewRetryNeverPausesPastTheIntervalAndItsJitter(t *testing.T) {
	ns := []int{}
	for n := 1; n <= 120; n++ {
		ns = append(ns, n)
	}
	ns = append(ns, 1000, 1<<20, 1<<40)
	for _, interval := range renewIntervals {
		for _, r := range renewDraws {
			retry := renewRetry(interval, fixedDraw(r))
			limit := interval + time.Duration(r*float64(interval)/5)
			for _, n := range ns {
				got := retry.Pause(n, plenty)
				require.LessOrEqual(t, got, limit, "interval %v, draw %v, n %d: past the interval plus its jitter", interval, r, n)
				require.GreaterOrEqual(t, got, firstPause(interval), "interval %v, draw %v, n %d: below the first pause", interval, r, n)
			}
			// A pause that starts a try (it ends before the validity
			// does), brought forward or not, for validities from the
			// reserve to three intervals.
			for n := 1; n <= 30; n++ {
				for left := reserve(interval); left <= 3*interval; left += interval / 50 {
					if got := retry.Pause(n, left); got < left && got > limit {
						t.Fatalf("interval %v, draw %v, n %d, left %v: a pause of %v, past the interval plus its jitter (%v)", interval, r, n, left, got, limit)
					}
				}
			}
		}
	}
}

// (c) The pauses grow by half from the first pause (500 ms, or the
// interval if shorter) up to the interval, and each is spread over a fifth
// more by the draw: exactly w + r×w/5. Multiplier 1 fails it (every pause
// stays the first), and so does a renewRetry that ignores its rand (the
// pauses drawn at 0 are no longer w).
func TestRenewRetryPausesGrowByHalfAndSpreadByTheDraw(t *testing.T) {
	for _, interval := range renewIntervals {
		for _, r := range renewDraws {
			retry := renewRetry(interval, fixedDraw(r))
			for n := 1; n <= 40; n++ {
				requireNear(t, paced(interval, n, r), retry.Pause(n, plenty), "interval %v, draw %v, n %d", interval, r, n)
			}
		}
		// The growth itself, drawn at 0: each pause half again the one
		// before until the cap, then the cap.
		retry := renewRetry(interval, fixedDraw(0))
		prev := retry.Pause(1, plenty)
		require.Equal(t, firstPause(interval), prev, "interval %v: the first pause", interval)
		for n := 2; n <= 40; n++ {
			got := retry.Pause(n, plenty)
			if want := prev + prev/2; want < interval {
				requireNear(t, want, got, "interval %v, n %d: not half again the pause before", interval, n)
			} else {
				require.Equal(t, interval, got, "interval %v, n %d: not the cap", interval, n)
			}
			prev = got
		}
		// The spread: the highest draw a fifth above the lowest, the middle
		// draw half-way.
		for n := 1; n <= 40; n++ {
			lo := renewRetry(interval, fixedDraw(0)).Pause(n, plenty)
			mid := renewRetry(interval, fixedDraw(0.5)).Pause(n, plenty)
			hi := renewRetry(interval, fixedDraw(nearOne)).Pause(n, plenty)
			requireNear(t, lo+lo/10, mid, "interval %v, n %d: the middle draw", interval, n)
			requireNear(t, lo+lo/5, hi, "interval %v, n %d: the highest draw", interval, n)
		}
	}
}

// (b) A pause that would start the next try later than the reserve (250
// ms, or half the first pause) before ValidUntil is brought forward so
// that the try starts at least the reserve before it, never below the
// first pause nor a quarter of the pause it replaces, whatever the draw;
// a pause that starts it exactly the reserve before is left alone; and
// when none fits, the pause reaches ValidUntil (the term ends first).
// Reserve 0 (or any reserve below 250 ms) fails the first, any reserve
// above it the second.
func TestRenewRetryBringsTheLastTryTheReserveBeforeValidUntil(t *testing.T) {
	for _, interval := range renewIntervals {
		first, res := firstPause(interval), reserve(interval)
		for _, r := range renewDraws {
			retry := renewRetry(interval, fixedDraw(r))
			for n := 1; n <= 40; n++ {
				p := retry.Pause(n, plenty) // as drawn; paced's figure is held above
				// Starts the try exactly the reserve before: left alone.
				require.Equal(t, p, retry.Pause(n, p+res), "interval %v, draw %v, n %d: a try that fits brought forward", interval, r, n)
				// A nanosecond later than that, and a sweep of validities
				// down to the reserve: brought forward, or none fits.
				w := renewRetry(interval, fixedDraw(0)).Pause(n, plenty)
				floor := max(first, w/4)
				lefts := []time.Duration{p + res - 1}
				for left := res; left < p+res; left += max(p/97, time.Millisecond) {
					lefts = append(lefts, left)
				}
				for _, left := range lefts {
					got := retry.Pause(n, left)
					switch {
					case left-res < floor:
						if got < left {
							t.Fatalf("interval %v, draw %v, n %d, left %v: a try after %v where none fits", interval, r, n, left, got)
						}
					case got > left-res:
						t.Fatalf("interval %v, draw %v, n %d, left %v: the try starts %v before ValidUntil, less than %v", interval, r, n, left, left-got, res)
					case got < floor:
						t.Fatalf("interval %v, draw %v, n %d, left %v: brought forward to %v, below max(first pause, w/4) = %v", interval, r, n, left, got, floor)
					case r == nearOne && left-got-res >= time.Microsecond:
						// The highest draw starts it at the reserve: the
						// reserve is that, not more.
						t.Fatalf("interval %v, n %d, left %v: the highest draw starts the try %v before ValidUntil, not %v", interval, n, left, left-got, res)
					}
				}
			}
		}
	}
}

// renewWalk follows a term whose every renewal fails, from its first
// failed renewal (interval after its last success, when its validity,
// validity from that success, has validity-interval left) to ValidUntil,
// as Leadership.keep does when each try fails at once: it returns the
// instants of every try from the last success, the failed renewal first,
// and what the validity had left when each started.
func renewWalk(interval, validity time.Duration, r float64) (at, left []time.Duration) {
	retry := renewRetry(interval, fixedDraw(r))
	l := validity - interval
	at, left = []time.Duration{interval}, []time.Duration{l}
	for n := 1; ; n++ {
		p := retry.Pause(n, l)
		if p >= l {
			return at, left
		}
		l -= p
		at, left = append(at, validity-l), append(left, l)
	}
}

// etcdValidity is a term's validity from a renewal at the session TTL ttl:
// the TTL less the margin.
func etcdValidity(ttl time.Duration) time.Duration { return ttl - etcdMargin(ttl) }

// (b) and (d) over a whole validity under a failure that lasts: every try
// starts at least the reserve before ValidUntil, for every TTL and draw;
// at the default TTL the term makes five or six tries in all (the failed
// renewal included), against twelve at a fixed 500 ms; and from 30 s into
// the failure, the budget of BUDGETS.md (at most one request a second, a
// try being a keep-alive and a read) holds: tries at least 2 s apart.
func TestRenewRetryTriesOverAWholeValidity(t *testing.T) {
	for _, s := range []int{2, 3, 4, 5, 10, 30, 60, 300, 3600} {
		ttl := time.Duration(s) * time.Second
		interval, validity := ttl/3, etcdValidity(ttl)
		for _, r := range renewDraws {
			at, left := renewWalk(interval, validity, r)
			t.Logf("TTL %v, draw %v: %d tries at %v", ttl, r, len(at), at)
			for i, l := range left {
				require.GreaterOrEqual(t, l, reserve(interval), "TTL %v, draw %v: try %d starts %v before ValidUntil", ttl, r, i+1, l)
			}
			// Requests from 30 s into the failure (the failed renewal is
			// the loop's first request to meet it) to ValidUntil.
			if since := at[0] + 30*time.Second; since < validity {
				requests := 0
				for i, a := range at {
					if a >= since {
						requests += 2
					}
					if i > 0 && at[i-1] >= since {
						require.GreaterOrEqual(t, a-at[i-1], 2*time.Second, "TTL %v, draw %v: tries %d and %d, 30 s into the failure", ttl, r, i, i+1)
					}
				}
				require.LessOrEqual(t, requests, int((validity-since+time.Second-1)/time.Second), "TTL %v, draw %v: requests from 30 s into the failure to ValidUntil", ttl, r)
			}
		}
	}

	// The default TTL, counted: the doc's figure. The failed renewal comes
	// 3.33 s after the last success and leaves 5.67 s of validity; the
	// pauses 0.5, 0.75, 1.125 and 1.69 s (each up to a fifth longer) fit,
	// and one more try is brought forward before ValidUntil unless the
	// draws were high enough to leave less than 0.88 s for it (the 250 ms
	// reserve plus a quarter of the 2.53 s pause it replaces).
	want := map[float64]int{0: 6, 0.5: 6, nearOne: 5}
	for _, r := range renewDraws {
		at, _ := renewWalk(DefaultSessionTTL/3, etcdValidity(DefaultSessionTTL), r)
		require.Len(t, at, want[r], "tries at the default TTL, draw %v: %v", r, at)
	}
	fixed := 0 // the pace before the backoff: every 500 ms
	for l := etcdValidity(DefaultSessionTTL) - DefaultSessionTTL/3; l > 0; l -= 500 * time.Millisecond {
		fixed++
	}
	require.Equal(t, 12, fixed, "tries at a fixed 500 ms")
}
