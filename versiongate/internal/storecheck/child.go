package storecheck

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// verifyPackage is the program verifyInChild builds: Verify on a history
// read from its standard input.
const verifyPackage = "github.com/reconkit/reconkit/versiongate/internal/storecheck/verifyhistory"

// ChildRequest is what verifyInChild sends the checker program on its
// standard input.
type ChildRequest struct {
	History []Op
	// Dir is where the visualization of an illegal history goes.
	Dir string
	// Timeout bounds the search; zero means CheckTimeout.
	Timeout time.Duration
}

// ChildResult is what the checker program answers on its standard output.
type ChildResult struct {
	Result porcupine.CheckResult
	Path   string
	Err    string
}

// Serve answers one ChildRequest read from in with a ChildResult written
// to out: the checker program's whole work.
func Serve(in []byte) []byte {
	var req ChildRequest
	var res ChildResult
	if err := json.Unmarshal(in, &req); err != nil {
		res.Err = fmt.Sprintf("decoding the history: %v", err)
	} else {
		var err error
		timeout := req.Timeout
		if timeout <= 0 {
			timeout = CheckTimeout
		}
		res.Result, res.Path, err = verifyHere(req.History, req.Dir, timeout)
		if err != nil {
			res.Err = err.Error()
		}
	}
	out, _ := json.Marshal(res)
	return out
}

// verifyInChild runs Verify in a program built without the race detector.
// A test binary built with -race runs the checker's search, all map
// lookups and allocations, several times slower, and the search is bounded
// by time (CheckTimeout): so in such a binary, histories that a plain
// build decides would be logged as undecided, and the search would spend
// that time on every core the tests share. The program is built with the
// go command that runs the tests, from the build cache after the first
// time.
func verifyInChild(history []Op, dir string, timeout time.Duration) (porcupine.CheckResult, string, error) {
	req, err := json.Marshal(ChildRequest{History: history, Dir: dir, Timeout: timeout})
	if err != nil {
		return porcupine.Unknown, "", fmt.Errorf("storecheck: encoding the history: %w", err)
	}
	// The bound only turns a hung build or check into an error: a cold
	// build cache on a starved machine compiles the standard library first.
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	bin := os.Getenv(VerifierEnv)
	if bin == "" {
		tmp, err := os.MkdirTemp("", "storecheck-")
		if err != nil {
			return porcupine.Unknown, "", err
		}
		defer os.RemoveAll(tmp)
		if bin, err = buildVerifier(ctx, tmp); err != nil {
			return porcupine.Unknown, "", err
		}
	}
	cmd := exec.CommandContext(ctx, bin)
	cmd.Stdin = bytes.NewReader(req)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return porcupine.Unknown, "", fmt.Errorf("storecheck: the checker program: %w\n%s", err, stderr.Bytes())
	}
	var res ChildResult
	if err := json.Unmarshal(out, &res); err != nil {
		return porcupine.Unknown, "", fmt.Errorf("storecheck: the checker program's answer %q: %w", out, err)
	}
	if res.Err != "" {
		return res.Result, res.Path, fmt.Errorf("storecheck: the checker program: %s", res.Err)
	}
	return res.Result, res.Path, nil
}

// VerifierEnv names the environment variable that gives the path of a
// checker program already built: a race-enabled test binary runs it for
// every history it checks in a child, instead of building the program
// for each (which costs a run of the go command, seconds on a starved
// machine, where the check itself takes milliseconds). WithVerifier sets
// it for a test binary's run.
const VerifierEnv = "STORECHECK_VERIFIER"

// buildVerifier builds the checker program into dir, with the go command
// that runs the tests (from the build cache after the first time), and
// returns its path.
func buildVerifier(ctx context.Context, dir string) (string, error) {
	bin := filepath.Join(dir, "verifyhistory")
	// -race=false after GOFLAGS, which may ask for -race.
	if out, err := exec.CommandContext(ctx, "go", "build", "-race=false", "-o", bin, verifyPackage).CombinedOutput(); err != nil {
		return "", fmt.Errorf("storecheck: building the checker without the race detector: %w\n%s", err, out)
	}
	return bin, nil
}

// TestingM is what a TestMain runs: *testing.M, or what WithVerifier
// returns (so that it can be handed on to goleak.VerifyTestMain).
type TestingM interface {
	Run() int
}

// WithVerifier returns m, whose Run, in a binary built with the race
// detector and not run with -short, first builds the checker program once for all the tests
// (VerifierEnv, unless already set), and removes it when they are done.
// For a TestMain:
//
//	func TestMain(m *testing.M) { goleak.VerifyTestMain(storecheck.WithVerifier(m)) }
//
// Without it every history checked in a child builds the program anew. A
// build that fails here is not reported: each check builds again, and
// reports the failure in its own test.
func WithVerifier(m TestingM) TestingM {
	return verifierM{m}
}

type verifierM struct{ m TestingM }

func (v verifierM) Run() int {
	// Under -short no history is checked in a child (see Verify): build
	// nothing. testing's flags are registered before TestMain runs.
	flag.Parse()
	if !raceEnabled || os.Getenv(VerifierEnv) != "" || testing.Short() {
		return v.m.Run()
	}
	tmp, err := os.MkdirTemp("", "storecheck-verifier-")
	if err != nil {
		return v.m.Run()
	}
	defer os.RemoveAll(tmp)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	bin, err := buildVerifier(ctx, tmp)
	cancel()
	if err != nil {
		return v.m.Run()
	}
	if err := os.Setenv(VerifierEnv, bin); err != nil {
		return v.m.Run()
	}
	defer os.Unsetenv(VerifierEnv)
	return v.m.Run()
}
