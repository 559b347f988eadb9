package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"
)

// config is what the flags set.
type config struct {
	pkg, run  string
	first     uint64
	seeds     int
	procs     int
	race      bool
	timelines string
	baseline  string // a git revision to measure first
}

// totals is what the runs reported.
type totals struct {
	mu         sync.Mutex
	runs       int
	failed     []uint64
	agentHours float64
	simulated  time.Duration
	cpu        time.Duration
}

var (
	runLine  = regexp.MustCompile(`fleetsim-run seed=(\d+) events=\d+ simulated=(\S+) agent-hours=([\d.]+) requests=\d+ violated=(true|false)`)
	failLine = regexp.MustCompile(`--- FAIL: \S+/seed=(\d+)`)
)

func main() {
	var c config
	flag.StringVar(&c.pkg, "pkg", "./examples/outsider", "directory of the package whose test runs the fleet")
	flag.StringVar(&c.run, "run", "^TestFleet$", "the test to run (-test.run)")
	flag.Uint64Var(&c.first, "first", 1, "the first seed")
	flag.IntVar(&c.seeds, "seeds", 100, "how many seeds to run")
	flag.IntVar(&c.procs, "procs", runtime.NumCPU(), "processes at once")
	flag.BoolVar(&c.race, "race", false, "build with the race detector")
	flag.StringVar(&c.timelines, "timelines", "", "write the whole timeline of every failed run to this directory")
	flag.StringVar(&c.baseline, "baseline", "", "a git revision whose package to run the same seeds on first, for a side-by-side figure")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	run := func(ctx context.Context, c config, out io.Writer) error {
		_, err := soak(ctx, c, out)
		return err
	}
	if c.baseline != "" {
		run = compare
	}
	if err := run(ctx, c, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		os.Exit(1)
	}
}

// compare runs soak on the package as it is at c.baseline, then as it is
// in the working tree, and writes the two totals side by side.
func compare(ctx context.Context, c config, out io.Writer) error {
	pkg, err := filepath.Abs(c.pkg)
	if err != nil {
		return err
	}
	top := exec.CommandContext(ctx, "git", "rev-parse", "--show-toplevel")
	top.Dir = pkg
	b, err := top.Output()
	if err != nil {
		return fmt.Errorf("-baseline needs the package in a git checkout: %w", err)
	}
	root := strings.TrimSpace(string(b))
	rel, err := filepath.Rel(root, pkg)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "soak-baseline")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	archive := exec.CommandContext(ctx, "sh", "-c", `git archive "$1" | tar -x -C "$2"`, "sh", c.baseline, dir)
	archive.Dir = root
	if b, err := archive.CombinedOutput(); err != nil {
		return fmt.Errorf("extracting %s: %w\n%s", c.baseline, err, b)
	}
	var before, after bytes.Buffer
	old := c
	old.pkg = filepath.Join(dir, rel)
	fmt.Fprintf(out, "%s:\n", c.baseline)
	rateOld, errOld := soak(ctx, old, io.MultiWriter(out, &before))
	fmt.Fprintln(out, "working tree:")
	rateNew, errNew := soak(ctx, c, io.MultiWriter(out, &after))
	fmt.Fprintf(out, "\nside by side (%s, seeds %d to %d):\n  %-14s %s  %-14s %s%s", c.run, c.first, c.first+uint64(c.seeds)-1,
		c.baseline, lastLine(before.String()), "working tree", lastLine(after.String()), ratio(rateOld, rateNew))
	return errors.Join(errOld, errNew)
}

// ratio is the line that gives the working tree's agent-hours per
// CPU-minute as a multiple of the baseline's, or nothing when either is
// not a positive figure (a run that simulated nothing).
func ratio(before, after float64) string {
	if !(before > 0) || !(after > 0) || math.IsInf(before, 0) || math.IsInf(after, 0) {
		return ""
	}
	return fmt.Sprintf("  ratio          %.2f (working tree / baseline, agent-hours per CPU-minute)\n", after/before)
}

// lastLine returns the last line of s, with its newline.
func lastLine(s string) string {
	s = strings.TrimRight(s, "\n")
	return s[strings.LastIndexByte(s, '\n')+1:] + "\n"
}

// soak builds the test binary, runs the seeds and writes the report to out.
// It returns the agent-hours per CPU-minute the runs gave, and an error
// when the build or a process failed, or a seed did.
func soak(ctx context.Context, c config, out io.Writer) (float64, error) {
	if c.seeds < 1 || c.procs < 1 {
		return 0, errors.New("-seeds and -procs must be at least 1")
	}
	dir, err := os.MkdirTemp("", "soak")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "fleet.test")
	args := []string{"test", "-c", "-o", bin}
	if c.race {
		args = append(args, "-race")
	}
	build := exec.CommandContext(ctx, "go", args...)
	build.Dir, build.Stderr = c.pkg, os.Stderr
	if err := build.Run(); err != nil {
		return 0, fmt.Errorf("building the test of %s: %w", c.pkg, err)
	}
	start := time.Now()
	var t totals
	var wg sync.WaitGroup
	errs := make([]error, c.procs)
	for p, r := range split(c.first, c.seeds, c.procs) {
		wg.Go(func() { errs[p] = runSeeds(ctx, c, bin, r.first, r.n, &t) })
	}
	wg.Wait()
	wall := time.Since(start)
	for _, seed := range t.failed {
		fmt.Fprintf(out, "FAILED seed %d: cd %s && go test -run '%s' -fleetsim.seed=%d\n", seed, c.pkg, c.run, seed)
	}
	perCPU := 0.0
	if t.cpu > 0 {
		perCPU = t.agentHours / t.cpu.Minutes()
	}
	fmt.Fprintf(out, "%d runs, %d failed, %.1f simulated hours, %.1f agent-hours in %.2f CPU-minutes (%s wall, %d processes): %.0f agent-hours per CPU-minute\n",
		t.runs, len(t.failed), t.simulated.Hours(), t.agentHours, t.cpu.Minutes(), wall.Round(time.Second), c.procs, perCPU)
	if err := errors.Join(errs...); err != nil {
		return perCPU, err
	}
	if len(t.failed) > 0 {
		return perCPU, fmt.Errorf("%d of %d seeds failed", len(t.failed), t.runs)
	}
	return perCPU, nil
}

// seedRange is n seeds from first on.
type seedRange struct {
	first uint64
	n     int
}

// split divides seeds seeds from first into at most procs ranges of
// nearly equal size.
func split(first uint64, seeds, procs int) []seedRange {
	var out []seedRange
	per := (seeds + procs - 1) / procs
	for p := range procs {
		n := min(per, seeds-p*per)
		if n <= 0 {
			break
		}
		out = append(out, seedRange{first: first + uint64(p*per), n: n})
	}
	return out
}

// run is what one "fleetsim-run" line reports.
type run struct {
	seed       uint64
	simulated  time.Duration
	agentHours float64
	violated   bool
}

// parse reads a "fleetsim-run" line, or a failed subtest's line (then only
// seed and violated are set), and reports whether line was one.
func parse(line string) (run, bool) {
	if m := runLine.FindStringSubmatch(line); m != nil {
		seed, err1 := strconv.ParseUint(m[1], 10, 64)
		sim, err2 := time.ParseDuration(m[2])
		hours, err3 := strconv.ParseFloat(m[3], 64)
		if err := errors.Join(err1, err2, err3); err != nil || sim < 0 || !(hours >= 0) {
			return run{}, false
		}
		return run{seed: seed, simulated: sim, agentHours: hours, violated: m[4] == "true"}, true
	}
	if m := failLine.FindStringSubmatch(line); m != nil {
		seed, err := strconv.ParseUint(m[1], 10, 64)
		return run{seed: seed, violated: true}, err == nil
	}
	return run{}, false
}

// runSeeds runs n seeds from first in one process of the test binary and
// adds what they report, and the process's CPU time, to t.
func runSeeds(ctx context.Context, c config, bin string, first uint64, n int, t *totals) error {
	args := []string{"-test.run", c.run, "-test.v", "-test.timeout", "0",
		"-fleetsim.seed", strconv.FormatUint(first, 10), "-fleetsim.count", strconv.Itoa(n)}
	if c.timelines != "" {
		args = append(args, "-fleetsim.timeline", c.timelines)
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = c.pkg
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return err
	}
	failed := map[uint64]bool{}
	sc := bufio.NewScanner(stdout)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		r, ok := parse(sc.Text())
		if !ok {
			continue
		}
		if r.violated {
			failed[r.seed] = true
		}
		if r.simulated > 0 {
			t.mu.Lock()
			t.runs++
			t.simulated += r.simulated
			t.agentHours += r.agentHours
			t.mu.Unlock()
		}
	}
	werr := cmd.Wait() // exits 1 when a seed failed; that is reported by seed
	t.mu.Lock()
	defer t.mu.Unlock()
	if cmd.ProcessState != nil {
		t.cpu += cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	}
	for seed := range failed {
		t.failed = append(t.failed, seed)
	}
	if werr != nil && len(failed) == 0 {
		return fmt.Errorf("seeds %d to %d: %w", first, first+uint64(n)-1, werr)
	}
	return sc.Err()
}
