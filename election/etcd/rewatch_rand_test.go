package etcd

import (
	"testing"
	"time"
)

// rewatchPause draws its fifth from the elector's source.
func TestRewatchPauseDrawsFromRand(t *testing.T) {
	quarter := func() float64 { return 0.25 }
	for n, want := range []time.Duration{525 * time.Millisecond, 787500 * time.Microsecond} {
		if got := rewatchPause(n+1, time.Minute, quarter); got != want {
			t.Errorf("rewatchPause(%d) = %v, want %v", n+1, got, want)
		}
	}
}
