package versiongate

import (
	"testing"
	"time"
)

// rejoinPause lies in [wait, 1.5·wait], and its draws differ: nodes that
// lost their records at one instant do not publish again at one instant.
func TestRejoinPauseJitters(t *testing.T) {
	for _, wait := range []time.Duration{pauseBase, 800 * time.Millisecond, DefaultRecordTTL} {
		seen := map[time.Duration]bool{}
		for range 200 {
			p := rejoinPause(wait)
			if p < wait || p > wait+wait/2 {
				t.Fatalf("rejoinPause(%v) = %v, want within [%v, %v]", wait, p, wait, wait+wait/2)
			}
			seen[p] = true
		}
		if len(seen) < 10 {
			t.Errorf("rejoinPause(%v): %d distinct pauses in 200 draws, want jitter", wait, len(seen))
		}
	}
}
