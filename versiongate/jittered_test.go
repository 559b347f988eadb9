package versiongate

import (
	"testing"
	"time"
)

// jittered lies in [wait, 1.5·wait], and its draws differ: nodes that
// lost their records, or their watches, at one instant do not publish or
// list again at one instant.
func TestJittered(t *testing.T) {
	for _, wait := range []time.Duration{pauseBase, 800 * time.Millisecond, DefaultRecordTTL} {
		seen := map[time.Duration]bool{}
		for range 200 {
			p := jittered(nil, wait)
			if p < wait || p > wait+wait/2 {
				t.Fatalf("jittered(%v) = %v, want within [%v, %v]", wait, p, wait, wait+wait/2)
			}
			seen[p] = true
		}
		if len(seen) < 10 {
			t.Errorf("jittered(%v): %d distinct pauses in 200 draws, want jitter", wait, len(seen))
		}
	}
}
