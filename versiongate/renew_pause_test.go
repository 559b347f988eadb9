package versiongate

import (
	"testing"
	"time"
)

// renewRetryPause's promises, over many draws of its jitter: a try it
// schedules starts no later than reserve before the deadline (or it waits
// for the deadline itself); a pause is never below base, nor below the
// unjittered backoff or a second, whichever is less; an unshortened pause
// lies in [w, 1.5w]; and draws differ (jitter).
func TestRenewRetryPause(t *testing.T) {
	const base = renewRetryBase
	cases := []struct {
		n                    int
		limit, left, reserve time.Duration
		wantW                time.Duration // the unjittered backoff
		mayShorten, mustWait bool
	}{
		{n: 1, limit: 20 * time.Second, left: 34 * time.Second, reserve: 6 * time.Second, wantW: base},
		{n: 3, limit: 20 * time.Second, left: 30 * time.Second, reserve: 6 * time.Second, wantW: 2 * time.Second},
		{n: 9, limit: 20 * time.Second, left: 60 * time.Second, reserve: 6 * time.Second, wantW: 20 * time.Second},
		// The backoff would start the next try after the last instant that
		// leaves the reserve: shortened.
		{n: 6, limit: 20 * time.Second, left: 18 * time.Second, reserve: 6 * time.Second, wantW: 16 * time.Second, mayShorten: true},
		{n: 7, limit: 20 * time.Second, left: 8 * time.Second, reserve: 6 * time.Second, wantW: 20 * time.Second, mayShorten: true},
		// No try fits before the reserve: wait for the deadline.
		{n: 7, limit: 20 * time.Second, left: 6500 * time.Millisecond, reserve: 6 * time.Second, wantW: 20 * time.Second, mustWait: true},
		{n: 2, limit: 3 * time.Second, left: 1200 * time.Millisecond, reserve: time.Second, wantW: time.Second, mustWait: true},
		{n: 4, limit: 20 * time.Second, left: -time.Second, reserve: 6 * time.Second, wantW: 4 * time.Second, mustWait: true},
	}
	for _, tc := range cases {
		seen := map[time.Duration]bool{}
		for range 2000 {
			p := renewRetryPause(tc.n, base, tc.limit, tc.left, tc.reserve, nil)
			seen[p] = true
			if tc.mustWait {
				if p != max(tc.left, 0) {
					t.Fatalf("%+v: pause %v, want the deadline %v", tc, p, tc.left)
				}
				continue
			}
			if p == tc.left {
				t.Fatalf("%+v: waits for the deadline although a try fits", tc)
			}
			if p > tc.left-tc.reserve {
				t.Fatalf("%+v: pause %v starts the try later than %v before the deadline", tc, p, tc.reserve)
			}
			if p < max(base, min(tc.wantW, time.Second)) {
				t.Fatalf("%+v: pause %v below its floor", tc, p)
			}
			if !tc.mayShorten && (p < tc.wantW || p > tc.wantW+tc.wantW/2) {
				t.Fatalf("%+v: pause %v outside [%v, 1.5×]", tc, p, tc.wantW)
			}
		}
		if !tc.mustWait && len(seen) < 100 {
			t.Fatalf("%+v: %d distinct pauses in 2000 draws: no jitter", tc, len(seen))
		}
	}
}
