package lease

import (
	"testing"
	"time"
)

// renewRetryWait's promises, over many draws: the first retry comes a
// RetryPeriod to 1.2 RetryPeriods later; later pauses grow by half with up
// to a fifth more; a pause that would start the next try later than half a
// RetryPeriod before the end is shortened to start it before then, but
// never below the RetryPeriod nor a quarter of the pause it replaces (so
// tries do not crowd towards the end); when none fits the term ends first.
func TestRenewRetryWait(t *testing.T) {
	const rp = 500 * time.Millisecond
	cases := []struct {
		n          int
		left       time.Duration
		w          time.Duration // unjittered
		shortened  bool
		termsFirst bool
	}{
		{n: 1, left: 50 * time.Second, w: rp},
		{n: 1, left: 100 * time.Millisecond, w: rp}, // the first retry is never shortened
		{n: 1, left: 600 * time.Millisecond, w: rp}, // nor put off to the term's end
		{n: 3, left: 40 * time.Second, w: rp * 9 / 4},
		{n: 10, left: 9 * time.Second, w: 19221679 * time.Microsecond, shortened: true},
		// After a shortened try there is too little left for another.
		{n: 11, left: 2600 * time.Millisecond, w: 28832519 * time.Microsecond, termsFirst: true},
		{n: 3, left: 700 * time.Millisecond, w: rp * 9 / 4, termsFirst: true},
	}
	for _, tc := range cases {
		seen := map[time.Duration]bool{}
		for range 2000 {
			p := renewRetryWait(tc.n, rp, tc.left, nil)
			seen[p] = true
			switch {
			case tc.shortened:
				if p > tc.left-rp/2 || p < max(rp, tc.w/4) {
					t.Fatalf("%+v: shortened pause %v outside [%v, %v]", tc, p, max(rp, tc.w/4), tc.left-rp/2)
				}
			case tc.termsFirst:
				if p < tc.left {
					t.Fatalf("%+v: pause %v: a try crowds the term's end", tc, p)
				}
			default:
				if p < tc.w || p > tc.w+tc.w/5+time.Millisecond {
					t.Fatalf("%+v: pause %v outside [%v, 1.2×]", tc, p, tc.w)
				}
			}
		}
		if len(seen) < 100 {
			t.Fatalf("%+v: %d distinct pauses in 2000 draws: no jitter", tc, len(seen))
		}
	}
}
