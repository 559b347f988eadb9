package checkpoint_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The crash tests start some four hundred children and kill each one. A
// child walks store operations on one goroutine, where the race detector
// has nothing to find, but a race-instrumented binary is slow to start: its
// shadow memory is mapped and its runtime set up in every process, about
// five times the CPU of a plain start and far more wall time on a busy
// machine. So when this binary has the race detector, the children are this
// package's test binary built once without it. The parent, which makes
// every check, keeps -race. If that build fails, the children are this
// binary itself, as before, only slower.

// childDir holds the plain build; TestMain makes and removes it.
var childDir string

var plainChild = sync.OnceValues(func() (string, error) {
	bin := filepath.Join(childDir, "checkpoint.test")
	// A cold build cache on a starved machine compiles the standard library
	// first; the bound only turns a hung build into the fallback.
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "test", "-c", "-o", bin, ".")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", &buildError{err: err, out: string(out)}
	}
	return bin, nil
})

type buildError struct {
	err error
	out string
}

func (e *buildError) Error() string {
	return "building the crash children: " + e.err.Error() + "\n" + e.out
}

// childBinary is the program to run as a crash child.
func childBinary(t *testing.T) string {
	t.Helper()
	// Under -short the few children run with the race detector: building
	// a plain binary takes a minute on a starved machine with a cold build
	// cache, more than the children it would speed up.
	if !raceEnabled || childDir == "" || testing.Short() {
		return os.Args[0]
	}
	bin, err := plainChild()
	if err != nil {
		t.Logf("children run with the race detector: %v", err)
		return os.Args[0]
	}
	return bin
}

// spreadKills runs TestCrashSafety-like tests: kills SIGKILLs (short under
// -short, or the number in the environment variable env), shared out over
// lanes stores checked side by side, lane i seeded with seed+i.
func spreadKills(t *testing.T, kills, short int, env string, lanes int, lane func(t *testing.T, seed uint64, kills int)) {
	t.Parallel()
	if testing.Short() {
		kills = short
	}
	if v := os.Getenv(env); v != "" {
		n, err := strconv.Atoi(v)
		require.NoError(t, err, env)
		kills = n
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d (lane i uses seed+i); %d SIGKILLs over %d stores", seed, kills, lanes)
	for i := range lanes {
		n := kills / lanes
		if i < kills%lanes {
			n++
		}
		t.Run(fmt.Sprintf("store%d", i), func(t *testing.T) {
			t.Parallel()
			lane(t, seed+uint64(i), n)
		})
	}
}

// runKilledChild starts a crash child with env added to this process's,
// hands each line of its output to onLine, whose kill starts the kill
// (after delay), and checks that the child died by that signal. A child
// that reaches no kill point within crashChildDeadline fails the test with
// hung's description.
func runKilledChild(t *testing.T, delay time.Duration, onLine func(line string, kill func()), hung func() string, env ...string) {
	t.Helper()
	cmd := exec.Command(childBinary(t), "-test.run=^$")
	cmd.Env = append(os.Environ(), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	timedOut := make(chan struct{})
	deadline := time.AfterFunc(crashChildDeadline, func() {
		close(timedOut)
		_ = cmd.Process.Kill()
	})
	var killTimer *time.Timer
	kill := func() {
		if killTimer == nil {
			killTimer = time.AfterFunc(delay, func() { _ = cmd.Process.Kill() })
		}
	}
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		onLine(sc.Text(), kill)
	}
	deadline.Stop()
	if killTimer != nil {
		killTimer.Stop()
	}
	_ = cmd.Process.Kill()
	err = cmd.Wait()
	select {
	case <-timedOut:
		t.Fatalf("%s; stderr: %s", hung(), stderr.String())
	default:
	}
	var exit *exec.ExitError
	require.True(t, errors.As(err, &exit), "child did not die by signal: %v; stderr: %s", err, stderr.String())
	require.False(t, exit.Exited(), "child exited on its own (code %d): %s", exit.ExitCode(), stderr.String())
}

// noForks keeps this process from starting a child until the returned
// function is called. The parent opens a store, and so its lock file,
// between two children of a lane while other lanes start theirs: a child
// forked meanwhile holds a copy of that descriptor until it execs (the
// descriptor is close-on-exec, but the copy exists in between), and with
// it the flock(2), which belongs to the open file description. On a loaded
// machine that window outlived the parent's close, and the parent's next
// open of the same store failed with ErrLocked. Forks take
// syscall.ForkLock for writing, so holding it for reading while a store is
// open keeps every fork out of that window.
func noForks() (release func()) {
	syscall.ForkLock.RLock()
	return syscall.ForkLock.RUnlock
}
