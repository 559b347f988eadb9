package fleetsim

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// The flags of Test. They are read, never written, by this package.
var (
	seedFlag     = flag.Uint64("fleetsim.seed", 0, "run this seed in every fleetsim.Test, in place of each test's own seeds")
	countFlag    = flag.Int("fleetsim.count", 0, "run this many seeds from -fleetsim.seed (default 1) on, in place of each test's own")
	timelineFlag = flag.String("fleetsim.timeline", "", "write the whole timeline of every failed run to this directory")
)

// Test runs the fleet cfg describes once per seed, each in a subtest
// "seed=N" with a synctest bubble of its own, and fails the subtest with
// Result.Err's report when an invariant is violated. With no seeds it runs
// seed 1. The flag -fleetsim.seed=N runs seed N alone, and with
// -fleetsim.count=K the K seeds from N on (cmd/soak uses them);
// -fleetsim.timeline=DIR writes each failed run's whole timeline to
// DIR/<test>-seed-N.timeline. Each run ends with a log line
// "fleetsim-run seed=N ..." giving its simulated and agent time.
func Test(t *testing.T, cfg Config, seeds ...uint64) {
	t.Helper()
	if *seedFlag != 0 || *countFlag != 0 {
		seeds = nil
		for i := range max(1, *countFlag) {
			seeds = append(seeds, max(1, *seedFlag)+uint64(i))
		}
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
				t.Logf("fleetsim-run seed=%d events=%d simulated=%s agent-hours=%.3f requests=%d violated=%v", seed,
					r.Events, r.Simulated.Round(time.Second), r.AgentTime.Hours(), r.Requests, len(r.Violations) > 0)
				if err := r.Err(); err != nil {
					if *timelineFlag != "" {
						writeTimeline(t, r)
					}
					t.Fatal(err)
				}
			})
		})
	}
}

// Seeded reports whether the seeds were given on the command line
// (-fleetsim.seed or -fleetsim.count), as cmd/soak gives them: a test too
// long for every run of the suite can skip unless they were.
func Seeded() bool { return *seedFlag != 0 || *countFlag != 0 }

// writeTimeline writes r's whole timeline to the -fleetsim.timeline
// directory.
func writeTimeline(t *testing.T, r Result) {
	t.Helper()
	var b strings.Builder
	for _, e := range r.Timeline {
		b.WriteString(e.String())
		b.WriteByte('\n')
	}
	name := strings.NewReplacer("/", "-", "=", "-").Replace(t.Name()) + ".timeline"
	path := filepath.Join(*timelineFlag, name)
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Errorf("writing the timeline: %v", err)
		return
	}
	t.Logf("the whole timeline is in %s", path)
}
