package backoff_test

import (
	"errors"
	"math"
	"testing"
	"time"

	"github.com/reconkit/reconkit/backoff"
)

// fixed returns a Rand that always draws u.
func fixed(u float64) func() float64 { return func() float64 { return u } }

// Renewal.Pause on fixed draws: growth, cap, jitter's span, a pause brought
// forward to start the last try Reserve before the deadline, the floor of
// a shortened pause, no try when none fits, and fields out of range
// clamped rather than trusted.
func TestRenewalPause(t *testing.T) {
	const ms = time.Millisecond
	doubling := backoff.Renewal{Initial: 500 * ms, Multiplier: 2, Max: 20 * time.Second, Jitter: 0.5,
		Reserve: 6 * time.Second, MinShortened: 1, MinShortenedCap: time.Second}
	byHalf := backoff.Renewal{Initial: 500 * ms, Multiplier: 1.5, Jitter: 0.2, Reserve: 250 * ms, MinShortened: 0.25}
	cases := []struct {
		name string
		r    backoff.Renewal
		n    int
		left time.Duration
		u    float64
		want time.Duration
	}{
		{"first", byHalf, 1, time.Hour, 0, 500 * ms},
		{"first, jitter's top", byHalf, 1, time.Hour, 0.5, 550 * ms},
		{"grows by half", byHalf, 3, time.Hour, 0, 1125 * ms},
		{"grows by half, exact", byHalf, 10, time.Hour, 0, 19221679687},
		{"n below 1 is the first", byHalf, -3, time.Hour, 0, 500 * ms},
		{"doubles", doubling, 3, time.Hour, 0, 2 * time.Second},
		{"jitter", doubling, 3, time.Hour, 0.5, 2500 * ms},
		{"capped", doubling, 9, time.Hour, 0, 20 * time.Second},
		{"capped, jitter", doubling, 100, time.Hour, 0.5, 25 * time.Second},
		{"fits exactly", doubling, 3, 8 * time.Second, 0, 2 * time.Second},
		// 16 s would start the try 2 s before the deadline: brought into
		// the last third of the 12 s to the last instant, [8 s, 12 s].
		{"shortened, low", doubling, 6, 18 * time.Second, 0, 8 * time.Second},
		{"shortened, mid", doubling, 6, 18 * time.Second, 0.5, 10 * time.Second},
		// 2 s to the last instant: the floor is min(20 s, 1 s) and the
		// last third starts at 1.33 s.
		{"shortened to the cap of its floor", doubling, 7, 8 * time.Second, 0, 1333333334},
		// 0.5 s to the last instant, below the 1 s floor: none fits.
		{"none fits: the deadline first", doubling, 7, 6500 * ms, 0, 20 * time.Second},
		{"none fits: the time left when it is longer", doubling, 2, 1200 * ms, 0, 1200 * ms},
		{"deadline passed", doubling, 4, -time.Second, 0, 4 * time.Second},
		// byHalf's floor is a quarter of w, uncapped: 7.2 s > 2.35 s.
		{"floor a quarter of w", byHalf, 11, 2600 * ms, 0, 28832519531},
		{"floor a quarter of w, fits", byHalf, 10, 9 * time.Second, 0, 5833333334},
		{"floor is Initial", backoff.Renewal{Initial: time.Second, Multiplier: 2, Reserve: time.Second}, 3, 2 * time.Second, 0, time.Second},
		{"below Initial none fits", backoff.Renewal{Initial: time.Second, Multiplier: 2, Reserve: time.Second}, 3, 1500 * ms, 0, 4 * time.Second},
		{"zero Initial is a millisecond", backoff.Renewal{}, 5, time.Hour, 0, ms},
		{"NaN multiplier is a fixed pace", backoff.Renewal{Initial: time.Second, Multiplier: math.NaN()}, 9, time.Hour, 0, time.Second},
		{"multiplier below 1 is a fixed pace", backoff.Renewal{Initial: time.Second, Multiplier: 0.5}, 9, time.Hour, 0, time.Second},
		{"huge growth stops", backoff.Renewal{Initial: time.Second, Multiplier: 1e300}, math.MaxInt, math.MaxInt64, 0, 1 << 60},
		{"jitter above 1 is 1", backoff.Renewal{Initial: time.Second, Jitter: 7}, 1, time.Hour, 0.5, 1500 * ms},
		{"negative jitter is 0", backoff.Renewal{Initial: time.Second, Jitter: -1}, 1, time.Hour, 0.5, time.Second},
		{"a draw of 1 stays below the top", backoff.Renewal{Initial: time.Second, Jitter: 1}, 1, time.Hour, 2, 2*time.Second - 1},
		{"a NaN draw is 0", backoff.Renewal{Initial: time.Second, Jitter: 1}, 1, time.Hour, math.NaN(), time.Second},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := tc.r
			r.Rand = fixed(tc.u)
			if got := r.Pause(tc.n, tc.left); got != tc.want {
				t.Fatalf("Pause(%d, %v) with draws of %v = %v (%d), want %v", tc.n, tc.left, tc.u, got, int64(got), tc.want)
			}
		})
	}
}

// Over many draws of the default source: every pause lies in its span or
// starts the try by the last instant, and the draws differ (jitter).
func TestRenewalPauseDraws(t *testing.T) {
	r := backoff.Renewal{Initial: 500 * time.Millisecond, Multiplier: 1.5, Max: 20 * time.Second, Jitter: 0.2,
		Reserve: 500 * time.Millisecond, MinShortened: 0.25}
	for _, tc := range []struct {
		n    int
		left time.Duration
		lo   time.Duration
		hi   time.Duration
	}{
		{1, time.Minute, 500 * time.Millisecond, 600 * time.Millisecond},
		{4, time.Minute, 1687500 * time.Microsecond, 2025 * time.Millisecond},
		{20, time.Minute, 20 * time.Second, 24 * time.Second},
		{20, 10 * time.Second, 6 * time.Second, 9500 * time.Millisecond},
	} {
		seen := map[time.Duration]bool{}
		for range 2000 {
			p := r.Pause(tc.n, tc.left)
			if p < tc.lo || p > tc.hi {
				t.Fatalf("Pause(%d, %v) = %v, outside [%v, %v]", tc.n, tc.left, p, tc.lo, tc.hi)
			}
			seen[p] = true
		}
		if len(seen) < 1000 {
			t.Fatalf("Pause(%d, %v): %d distinct pauses in 2000 draws: no jitter", tc.n, tc.left, len(seen))
		}
	}
}

func TestRenewalValidate(t *testing.T) {
	good := backoff.Renewal{Initial: time.Second, Multiplier: 1.5, Jitter: 0.2, Reserve: time.Second, MinShortened: 0.25}
	if err := good.Validate(); err != nil {
		t.Fatalf("Validate() = %v", err)
	}
	for name, mutate := range map[string]func(*backoff.Renewal){
		"initial":       func(r *backoff.Renewal) { r.Initial = 0 },
		"multiplier":    func(r *backoff.Renewal) { r.Multiplier = 0.5 },
		"NaN":           func(r *backoff.Renewal) { r.Multiplier = math.NaN() },
		"jitter":        func(r *backoff.Renewal) { r.Jitter = 1.5 },
		"reserve":       func(r *backoff.Renewal) { r.Reserve = -1 },
		"min shortened": func(r *backoff.Renewal) { r.MinShortened = -0.1 },
	} {
		r := good
		mutate(&r)
		if err := r.Validate(); !errors.Is(err, backoff.ErrInvalidOption) {
			t.Errorf("%s: Validate() = %v, want ErrInvalidOption", name, err)
		}
	}
}
