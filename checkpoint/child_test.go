package checkpoint_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"
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
	if !raceEnabled || childDir == "" {
		return os.Args[0]
	}
	bin, err := plainChild()
	if err != nil {
		t.Logf("children run with the race detector: %v", err)
		return os.Args[0]
	}
	return bin
}
