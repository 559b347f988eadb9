package fleetsim

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
// "fleetsim-run seed=N ..." giving its simulated and agent time. It is
// [TestWatched] with no host checks.
func Test(t *testing.T, cfg Config, seeds ...uint64) {
	t.Helper()
	TestWatched(t, cfg, nil, seeds...)
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
