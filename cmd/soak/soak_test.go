package main

import (
	"math"
	"reflect"
	"testing"
	"time"
)

func TestSplit(t *testing.T) {
	for _, tc := range []struct {
		first        uint64
		seeds, procs int
		want         []seedRange
	}{
		{1, 10, 2, []seedRange{{1, 5}, {6, 5}}},
		{1, 5, 2, []seedRange{{1, 3}, {4, 2}}},
		{7, 1, 4, []seedRange{{7, 1}}},
		{1, 4, 3, []seedRange{{1, 2}, {3, 2}}},
	} {
		if got := split(tc.first, tc.seeds, tc.procs); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("split(%d, %d, %d) = %v, want %v", tc.first, tc.seeds, tc.procs, got, tc.want)
		}
	}
}

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		line string
		want run
		ok   bool
	}{
		{"    fleetsim.go:49: fleetsim-run seed=12 events=30 simulated=15m2s agent-hours=0.727 requests=2512 violated=false",
			run{seed: 12, simulated: 15*time.Minute + 2*time.Second, agentHours: 0.727}, true},
		{"fleetsim-run seed=3 events=1 simulated=1h0m0s agent-hours=4.5 requests=9 violated=true",
			run{seed: 3, simulated: time.Hour, agentHours: 4.5, violated: true}, true},
		{"    --- FAIL: TestFleet/seed=9 (12.00s)", run{seed: 9, violated: true}, true},
		{"--- PASS: TestFleet/seed=9 (12.00s)", run{}, false},
		{"fleetsim-run seed=x", run{}, false},
	} {
		got, ok := parse(tc.line)
		if ok != tc.ok || got != tc.want {
			t.Errorf("parse(%q) = %+v, %v; want %+v, %v", tc.line, got, ok, tc.want, tc.ok)
		}
	}
}

// The lines soak reads come from another process: parse never panics, and
// what it accepts names a seed it could print again.
func FuzzParse(f *testing.F) {
	for _, line := range []string{
		"    fleetsim.go:49: fleetsim-run seed=12 events=30 simulated=15m2s agent-hours=0.727 requests=2512 violated=false",
		"    --- FAIL: TestFleet/seed=9 (12.00s)",
		"fleetsim-run seed=99999999999999999999999 events=1 simulated=1s agent-hours=1 requests=1 violated=true",
		"fleetsim-run seed=1 events=1 simulated=9999999999h agent-hours=1e400 requests=1 violated=false",
		"fleetsim-run seed=1 events=1 simulated=-5s agent-hours=1 requests=1 violated=false",
		"fleetsim-run seed=1 events=1 simulated=5s agent-hours=NaN requests=1 violated=false",
		"",
	} {
		f.Add(line)
	}
	f.Fuzz(func(t *testing.T, line string) {
		r, ok := parse(line)
		if !ok && r != (run{}) {
			t.Errorf("parse(%q) refused the line but returned %+v", line, r)
		}
		if ok && (r.simulated < 0 || !(r.agentHours >= 0)) {
			t.Errorf("parse(%q) = %+v: negative or not a number", line, r)
		}
	})
}

func TestLastLine(t *testing.T) {
	for in, want := range map[string]string{
		"FAILED seed 2: ...\n4 runs, 1 failed: 44 agent-hours per CPU-minute\n": "4 runs, 1 failed: 44 agent-hours per CPU-minute\n",
		"one line": "one line\n",
		"a\nb\n\n": "b\n",
		"":         "\n",
	} {
		if got := lastLine(in); got != want {
			t.Errorf("lastLine(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestRatio(t *testing.T) {
	for _, tc := range []struct {
		before, after float64
		want          string
	}{
		{50, 100, "  ratio          2.00 (working tree / baseline, agent-hours per CPU-minute)\n"},
		{64, 90, "  ratio          1.41 (working tree / baseline, agent-hours per CPU-minute)\n"},
		{0, 90, ""},
		{50, 0, ""},
		{math.NaN(), 1, ""},
		{math.Inf(1), 1, ""},
	} {
		if got := ratio(tc.before, tc.after); got != tc.want {
			t.Errorf("ratio(%v, %v) = %q, want %q", tc.before, tc.after, got, tc.want)
		}
	}
}
