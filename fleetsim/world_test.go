package fleetsim

import (
	"context"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// starts runs a fleet of n agents that only wait, with no fault, and
// returns when each agent first started, since the run began.
func starts(t *testing.T, seed uint64, n int) []time.Duration {
	t.Helper()
	at := make([]time.Duration, n)
	synctest.Test(t, func(t *testing.T) {
		begin := time.Now()
		var mu sync.Mutex
		r := Simulate(t.Context(), Config{Seed: seed, Agents: n, Duration: time.Minute, Quiet: time.Second,
			Nemesis: Nemesis{}.Only(),
			Agent: func(ctx context.Context, d Deps) error {
				if d.Boot == 0 {
					mu.Lock()
					at[d.Index] = time.Since(begin)
					mu.Unlock()
				}
				<-ctx.Done()
				return nil
			}})
		if err := r.Err(); err != nil {
			t.Fatal(err)
		}
	})
	return at
}

// The agents start at distinct instants within the first second, drawn
// from the seed: the same instants for one seed in every run, other
// instants for another seed.
func TestStaggeredStarts(t *testing.T) {
	const n = 8
	one, again, other := starts(t, 7, n), starts(t, 7, n), starts(t, 8, n)
	for i, d := range one {
		if d < 0 || d >= stagger {
			t.Errorf("agent-%d started at %s, want within [0, %s)", i, d, stagger)
		}
	}
	sorted := slices.Clone(one)
	slices.Sort(sorted)
	if len(slices.Compact(sorted)) != n {
		t.Errorf("agents started at %v: some at one instant, want each at its own", one)
	}
	if !slices.Equal(one, again) {
		t.Errorf("seed 7 started its agents at %v, then at %v: want the same instants", one, again)
	}
	if slices.Equal(one, other) {
		t.Errorf("seeds 7 and 8 started their agents at the same instants %v", one)
	}
}
