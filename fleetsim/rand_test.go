package fleetsim

import (
	"slices"
	"sync"
	"testing"
)

func draws(r func() float64) []float64 {
	out := make([]float64, 8)
	for i := range out {
		out[i] = r()
	}
	return out
}

// Each loop of each run of each agent gets a source of its own, the same
// for the same seed: the draws an agent's loops make replay with the seed,
// and no two agents, runs or loops share them.
func TestDepsRandIsOneSourcePerLoopRunAndAgent(t *testing.T) {
	w := &world{cfg: Config{Seed: 5}}
	a, b := newSlot(w, 0), newSlot(w, 1)
	a.boot, b.boot = 1, 1
	first := draws(a.deps(false).Rand("lease"))
	for _, u := range first {
		if !(u >= 0 && u < 1) {
			t.Fatalf("draw %v outside [0, 1)", u)
		}
	}
	if again := draws(a.deps(false).Rand("lease")); !slices.Equal(first, again) {
		t.Errorf("one seed, agent, run and loop: draws %v, then %v", first, again)
	}
	if got := draws(loopRand(5, "agent-0", 0, "lease")); !slices.Equal(first, got) {
		t.Errorf("Deps.Rand is not the run's seed, name, boot and loop: %v, want %v", first, got)
	}
	other := map[string][]float64{
		"another agent": draws(b.deps(false).Rand("lease")),
		"another loop":  draws(a.deps(false).Rand("nodestatus")),
		"another seed":  draws(loopRand(6, "agent-0", 0, "lease")),
	}
	a.boot = 2
	other["the next run"] = draws(a.deps(false).Rand("lease"))
	for what, got := range other {
		if slices.Equal(first, got) {
			t.Errorf("%s draws what agent-0's first run's loop draws: %v", what, got)
		}
	}
}

// A loop's source may be called from several goroutines (-race checks).
func TestDepsRandIsSafeForConcurrentUse(t *testing.T) {
	r := loopRand(1, "agent-0", 0, "versiongate")
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 100 {
				r()
			}
		})
	}
	wg.Wait()
}
