package checkpoint_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconkit/reconkit/checkpoint"
)

// The crash test re-executes the test binary as a child that walks a fixed
// sequence of store operations, printing "begin N" before operation N and
// "done N" after it returns. The parent chooses its kill point from what the
// child has acknowledged, never from elapsed time: during start-up, right
// after the k-th acknowledged operation, or at a random point inside the
// next one (after its "begin", plus a random delay). It then opens the store
// and checks that the state is exactly the one after the last acknowledged
// operation or the one after the next: old or new, never torn.
const (
	crashChildEnv = "RECONKIT_CHECKPOINT_CRASH_DIR"
	crashStartEnv = "RECONKIT_CHECKPOINT_CRASH_START"
	// crashKillsEnv sets how many kills TestCrashSafety performs.
	crashKillsEnv = "RECONKIT_CHECKPOINT_CRASH_KILLS"
	crashMaxGens  = 3
)

func crashID(i int) string {
	if i == 0 {
		return ""
	}
	return fmt.Sprintf("c%06d", i)
}

// crashPayload is several KiB so a write is not one page.
func crashPayload(i int) []byte {
	return bytes.Repeat([]byte(fmt.Sprintf("payload %d;", i)), 200+(i%40)*50)
}

// crashState is the observable state after step s. Step 3i-2 saves c_i,
// 3i-1 makes it current, 3i makes it last-known-good.
type crashState struct {
	current, lkg string
	trialAt      int64 // Unix seconds, 0 when unset
	next         string
	nextSaved    bool
}

func stateAfter(s int) crashState {
	k, r := s/3, s%3
	st := crashState{current: crashID(k), lkg: crashID(k), next: crashID(k + 1)}
	if k > 0 {
		st.trialAt = int64(3*k - 1)
	}
	switch r {
	case 1:
		st.nextSaved = true
	case 2:
		st.current, st.trialAt, st.nextSaved = crashID(k+1), int64(s), true
	}
	return st
}

func crashStep(ctx context.Context, s checkpoint.LKGStore, step int) error {
	i := (step + 2) / 3
	hash := func(i int) string {
		if i == 0 {
			return ""
		}
		return checkpoint.HashPayload(crashPayload(i))
	}
	switch step - 3*(i-1) {
	case 1:
		return s.Save(ctx, checkpoint.Checkpoint{ID: crashID(i), Payload: crashPayload(i), Created: time.Unix(int64(step), 0)})
	case 2:
		return s.SetState(ctx, checkpoint.State{
			Assigned: crashID(i), AssignedHash: hash(i), AssignedAt: time.Unix(int64(step), 0), Active: crashID(i),
			LastKnownGood: crashID(i - 1), LastKnownGoodHash: hash(i - 1), TriesLeft: 2,
		})
	default:
		return s.SetState(ctx, checkpoint.State{
			Assigned: crashID(i), AssignedHash: hash(i), AssignedAt: time.Unix(int64(step-1), 0), Active: crashID(i),
			LastKnownGood: crashID(i), LastKnownGoodHash: hash(i),
		})
	}
}

// crashChild runs in the re-executed test binary and never returns
// normally: the parent kills it.
func crashChild() int {
	ctx := context.Background()
	fmt.Fprintln(os.Stdout, "start")
	start, err := strconv.Atoi(os.Getenv(crashStartEnv))
	if err != nil {
		fmt.Fprintln(os.Stderr, "bad start step:", err)
		return 2
	}
	s, err := checkpoint.NewFS(checkpoint.FSConfig{Dir: os.Getenv(crashChildEnv), MaxGenerations: crashMaxGens})
	if err == nil {
		err = s.Initialize(ctx)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "open:", err)
		return 2
	}
	fmt.Fprintf(os.Stdout, "begin %d\n", start+1)
	for step := start + 1; ; step++ {
		if err := crashStep(ctx, s, step); err != nil {
			fmt.Fprintf(os.Stderr, "step %d: %v\n", step, err)
			return 2
		}
		fmt.Fprintf(os.Stdout, "done %d\n", step)
		fmt.Fprintf(os.Stdout, "begin %d\n", step+1)
	}
}

// observe opens the store in dir and returns its state, checking every
// referenced checkpoint's content.
func observe(t *testing.T, dir string, next string) crashState {
	t.Helper()
	defer noForks()()
	ctx := context.Background()
	s, err := checkpoint.NewFS(checkpoint.FSConfig{Dir: dir, MaxGenerations: crashMaxGens})
	require.NoError(t, err)
	require.NoError(t, s.Initialize(ctx))
	defer s.Close()
	var st crashState
	rec, err := s.State(ctx)
	require.NoError(t, err)
	st.current, st.lkg = rec.Assigned, rec.LastKnownGood
	if !rec.AssignedAt.IsZero() {
		st.trialAt = rec.AssignedAt.Unix()
	}
	for _, id := range []string{st.current, st.lkg} {
		if id == "" {
			continue
		}
		cp, err := s.Load(ctx, id)
		require.NoError(t, err, "load %s", id)
		i, _ := strconv.Atoi(strings.TrimPrefix(id, "c"))
		require.Equal(t, crashPayload(i), cp.Payload, "payload of %s", id)
	}
	st.next = next
	cp, err := s.Load(ctx, next)
	switch {
	case errors.Is(err, checkpoint.ErrNotFound):
	case err != nil:
		require.NoError(t, err, "load %s", next)
	default:
		i, _ := strconv.Atoi(strings.TrimPrefix(next, "c"))
		require.Equal(t, crashPayload(i), cp.Payload, "payload of %s", next)
		st.nextSaved = true
	}
	// No temporary file survives Initialize, and modes are private.
	for _, d := range []string{dir, filepath.Join(dir, "checkpoints")} {
		fi, err := os.Stat(d)
		require.NoError(t, err)
		require.Equal(t, fs.FileMode(0o700), fi.Mode().Perm(), d)
		entries, err := os.ReadDir(d)
		require.NoError(t, err)
		for _, e := range entries {
			require.False(t, strings.HasPrefix(e.Name(), ".tmp-"), "temporary file %s left in %s", e.Name(), d)
			if e.Type().IsRegular() {
				info, err := e.Info()
				require.NoError(t, err)
				require.Equal(t, fs.FileMode(0o600), info.Mode().Perm(), e.Name())
			}
		}
	}
	return st
}

// crashLanes is how many independent stores TestCrashSafety crashes at
// once. A kill costs a process start and a few fsyncs, mostly waiting, so
// the kills are spread over stores checked side by side.
const crashLanes = 4

func TestCrashSafety(t *testing.T) {
	spreadKills(t, 300, 30, crashKillsEnv, crashLanes, crashLane)
}

// crashLane kills a child working on one store kills times, checking the
// store after each kill.
func crashLane(t *testing.T, seed uint64, kills int) {
	dir := filepath.Join(t.TempDir(), "store")
	rng := rand.New(rand.NewPCG(seed, 7))
	step := 0
	for kill := range kills {
		// Every eighth child dies during start-up; the others after 1 to 4
		// acknowledged operations, so progress does not depend on speed.
		plan := killPlan{acks: 1 + rng.IntN(4), inside: rng.IntN(2) == 0, delay: time.Duration(rng.IntN(3000)) * time.Microsecond}
		if kill%8 == 0 {
			plan.acks = 0
		}
		acked := runCrashChild(t, dir, step, plan)
		before, after := stateAfter(acked), stateAfter(acked+1)
		got := observe(t, dir, before.next)
		if got != before && after.next != before.next {
			// Making a checkpoint last-known-good moves on to the next one.
			got = observe(t, dir, after.next)
		}
		switch got {
		case before:
			step = acked
		case after:
			step = acked + 1
		default:
			t.Fatalf("kill %d (%+v): torn state after step %d acknowledged:\n got    %+v\n old    %+v\n new    %+v", kill, plan, acked, got, before, after)
		}
	}
	t.Logf("%d SIGKILLs, %d store operations completed, state old-or-new after every kill", kills, step)
	require.Greater(t, step, kills/2, "the child made too little progress for the test to mean anything")
}

// killPlan says when the parent kills the child: once acks operations have
// been acknowledged since it started and, if inside, once the next one has
// begun; then after delay. With acks 0 and not inside, the kill is aimed at
// start-up (opening the store), from the child's first line on.
type killPlan struct {
	acks   int
	inside bool
	delay  time.Duration
}

// crashChildDeadline bounds how long a child may take to reach its kill
// point. It only turns a hung child into a failure; no test outcome
// depends on it.
const crashChildDeadline = 5 * time.Minute

// runCrashChild starts the child from step, kills it at the point plan
// names and returns the last step it acknowledged.
func runCrashChild(t *testing.T, dir string, step int, plan killPlan) int {
	t.Helper()
	acked := step
	runKilledChild(t, plan.delay, func(line string, kill func()) {
		if line == "start" {
			if plan.acks == 0 && !plan.inside {
				kill()
			}
			return
		}
		if v, ok := strings.CutPrefix(line, "begin "); ok {
			n, err := strconv.Atoi(v)
			require.NoError(t, err, "child output %q", line)
			require.Equal(t, acked+1, n, "child began an unexpected step")
			if plan.inside && acked-step == plan.acks {
				kill()
			}
			return
		}
		n, err := strconv.Atoi(strings.TrimPrefix(line, "done "))
		require.NoError(t, err, "child output %q", line)
		require.Equal(t, acked+1, n, "child skipped a step")
		acked = n
		if !plan.inside && acked-step == plan.acks {
			kill()
		}
	}, func() string {
		return fmt.Sprintf("child did not reach its kill point (%+v) within %v; acknowledged %d steps", plan, crashChildDeadline, acked-step)
	}, crashChildEnv+"="+dir, crashStartEnv+"="+strconv.Itoa(step))
	return acked
}
