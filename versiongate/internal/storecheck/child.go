package storecheck

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
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
	tmp, err := os.MkdirTemp("", "storecheck-")
	if err != nil {
		return porcupine.Unknown, "", err
	}
	defer os.RemoveAll(tmp)
	bin := filepath.Join(tmp, "verifyhistory")
	// The bounds only turn a hung build or check into an error: a cold
	// build cache on a starved machine compiles the standard library first.
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	// -race=false after GOFLAGS, which may ask for -race.
	if out, err := exec.CommandContext(ctx, "go", "build", "-race=false", "-o", bin, verifyPackage).CombinedOutput(); err != nil {
		return porcupine.Unknown, "", fmt.Errorf("storecheck: building the checker without the race detector: %w\n%s", err, out)
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
