package fleetsim

import (
	"flag"
	"fmt"
	"testing"
	"testing/synctest"
	"time"
)

// seedFlag is -fleetsim.seed: it replaces the seeds a test gives Test.
var seedFlag = flag.Uint64("fleetsim.seed", 0, "run only this seed in every fleetsim.Test (0: each test's own seeds)")

// Test runs the fleet cfg describes once per seed, each in a subtest
// "seed=N" with a synctest bubble of its own, and fails the subtest with
// Result.Err's report when an invariant is violated. With no seeds it runs
// seed 1; with -fleetsim.seed=N it runs seed N alone. Subtests run one
// after another: a test that wants them in parallel calls Test from
// several parallel subtests.
func Test(t *testing.T, cfg Config, seeds ...uint64) {
	t.Helper()
	if *seedFlag != 0 {
		seeds = []uint64{*seedFlag}
	}
	if len(seeds) == 0 {
		seeds = []uint64{1}
	}
	if cfg.Start.IsZero() {
		cfg.Start = time.Now().UTC().Truncate(24 * time.Hour)
	}
	for _, seed := range seeds {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c := cfg
				c.Seed = seed
				r := Simulate(t.Context(), c)
				if err := r.Err(); err != nil {
					t.Fatal(err)
				}
				t.Logf("seed %d: %d events over %s, %d agents ran %.1f agent-hours, %d apiserver requests",
					seed, r.Events, r.Simulated.Truncate(time.Second), c.withDefaults().Agents, r.AgentTime.Hours(), r.Requests)
			})
		})
	}
}
