package fleetsim

import (
	"context"
	"math"
	"sync"
	"testing"
	"time"
)

// Under ClockDrift each agent's clock, and a ticker on it, runs at a rate
// within MaxDrift of simulated time, and not every one at the same rate.
func TestClockDrift(t *testing.T) {
	var mu sync.Mutex
	rates := map[string]float64{}
	agent := func(ctx context.Context, d Deps) error {
		start, clockStart := time.Now(), d.Clock.Now()
		tick := d.Clock.NewTicker(time.Second)
		defer tick.Stop()
		ticks := 0
		for {
			select {
			case <-ctx.Done():
				real := time.Since(start).Seconds()
				mu.Lock()
				rates[d.Name] = d.Clock.Since(clockStart).Seconds() / real
				rates[d.Name+" ticks"] = float64(ticks) / real
				mu.Unlock()
				return nil
			case <-tick.C():
				ticks++
			}
		}
	}
	r := simulate(t, Config{Agent: agent, Duration: 30 * time.Minute, Quiet: time.Second,
		Nemesis: Nemesis{Every: time.Minute, MaxDrift: 0.01}.Only(ClockDrift)})
	if err := r.Err(); err != nil {
		t.Fatal(err)
	}
	distinct := map[float64]bool{}
	for name, rate := range rates {
		if math.Abs(rate-1) > 0.0101 {
			t.Errorf("%s: rate %.5f, want within 1%% of 1", name, rate)
		}
		distinct[math.Round(rate*1e4)] = true
	}
	if len(distinct) < 2 {
		t.Errorf("every clock ran at one rate: %v", rates)
	}
}
