package checkpoint_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconkit/reconkit/checkpoint"
)

// The controller crash test re-executes the test binary as a child that
// drives a Controller on an FSStore through rounds: it assigns round r's
// configuration (every third one fails its health probe), waits for the
// trial to end in a graduation or a rollback, and goes on. It prints each
// event it has seen through. The parent kills it with SIGKILL at a point
// chosen from those acknowledgements (after the k-th, or after "assigned"
// while the trial runs, plus a random delay), reads the store and judges
// what it finds: the last-known-good is a configuration that passes its
// probe and that graduated in one life of the child at least TrialDuration
// long; the active one is assigned, last-known-good or local.
const (
	ctrlChildEnv  = "RECONKIT_CHECKPOINT_CTRL_DIR"
	ctrlKillsEnv  = "RECONKIT_CHECKPOINT_CTRL_KILLS"
	ctrlTrial     = 100 * time.Millisecond
	ctrlCheck     = 5 * time.Millisecond
	ctrlMaxStarts = 3
)

func ctrlRoundID(r int) string { return fmt.Sprintf("r%d", r) }

func ctrlBad(r int) bool { return r%3 == 0 }

func ctrlRound(id string) int {
	r, err := strconv.Atoi(strings.TrimPrefix(id, "r"))
	if err != nil {
		return 0
	}
	return r
}

// ctrlChild runs in the re-executed test binary until it is killed.
func ctrlChild() int {
	ctx := context.Background()
	fail := func(what string, err error) int {
		fmt.Fprintf(os.Stderr, "%s: %v\n", what, err)
		return 2
	}
	store, err := checkpoint.NewFS(checkpoint.FSConfig{Dir: os.Getenv(ctrlChildEnv), MaxGenerations: 4})
	if err != nil {
		return fail("store", err)
	}
	statuses := make(chan checkpoint.Status[string], 1000)
	ctrl, err := checkpoint.New(checkpoint.Config[string]{
		Store:          store,
		Parse:          func(b []byte) (string, error) { return string(b), nil },
		Validate:       func(string) error { return nil },
		Local:          "local",
		TrialDuration:  ctrlTrial,
		CheckInterval:  ctrlCheck,
		MaxTrialStarts: ctrlMaxStarts,
		Probe: func(_ context.Context, cfg string) error {
			if strings.HasSuffix(cfg, " bad") {
				return errors.New("bad configuration")
			}
			return nil
		},
		OnStatus: func(st checkpoint.Status[string]) { statuses <- st },
	})
	if err != nil {
		return fail("controller", err)
	}
	st, err := ctrl.Bootstrap(ctx)
	if err != nil {
		return fail("bootstrap", err)
	}
	fmt.Printf("boot %s %s\n", st.Phase, st.ID)
	go func() { _ = ctrl.Run(ctx) }()
	// waitTrial waits until the trial of id has ended and says how.
	waitTrial := func(id string) {
		for st := range statuses {
			if st.Assigned != id || st.Phase == checkpoint.PhaseTrial {
				continue
			}
			fmt.Printf("%s %s\n", st.Phase, id)
			return
		}
	}
	r := ctrlRound(st.Assigned)
	if st.Phase == checkpoint.PhaseTrial {
		waitTrial(st.ID)
	}
	for r++; ; r++ {
		payload := fmt.Sprintf("round %d", r)
		if ctrlBad(r) {
			payload += " bad"
		}
		st, err := ctrl.Assign(ctx, []byte(payload), checkpoint.Source{UID: ctrlRoundID(r), Origin: "test"})
		if err != nil {
			return fail("assign", err)
		}
		fmt.Printf("assigned %s\n", st.ID)
		waitTrial(st.ID)
	}
}

// ctrlLanes is how many independent stores TestControllerCrashSafety
// crashes at once: a child's life is mostly trials waiting on the clock.
const ctrlLanes = 2

func TestControllerCrashSafety(t *testing.T) {
	spreadKills(t, 100, 16, ctrlKillsEnv, ctrlLanes, ctrlLane)
}

// ctrlLane kills a controller child working on one store kills times,
// judging the store after each kill.
func ctrlLane(t *testing.T, seed uint64, kills int) {
	dir := t.TempDir() + "/store"
	rng := rand.New(rand.NewPCG(seed, 11))
	var events, graduations, rollbacks int
	lkg := ""
	for kill := range kills {
		// After 1 to 3 events; half the time inside the trial that
		// follows an assignment.
		plan := killPlan{acks: 1 + rng.IntN(3), inside: rng.IntN(2) == 0, delay: time.Duration(rng.IntN(int(ctrlTrial)))}
		start := time.Now()
		lines := runCtrlChild(t, dir, plan)
		life := time.Since(start) // an upper bound of the child's life
		for _, l := range lines {
			switch {
			case strings.HasPrefix(l, string(checkpoint.PhaseLastKnownGood)+" "):
				graduations++
			case strings.HasPrefix(l, string(checkpoint.PhaseRolledBack)+" "):
				rollbacks++
			}
		}
		events += len(lines)

		st := readStoreState(t, dir)
		if st.LastKnownGood != "" {
			r := ctrlRound(st.LastKnownGood)
			require.False(t, ctrlBad(r), "kill %d: last-known-good %s fails its probe; state %+v; child said %q", kill, st.LastKnownGood, st, lines)
		}
		if st.LastKnownGood != lkg {
			// It graduated in this life, which must have lasted a trial.
			require.GreaterOrEqual(t, life, ctrlTrial,
				"kill %d: %s became last-known-good in a life of %v, shorter than the trial; child said %q", kill, st.LastKnownGood, life, lines)
			require.Greater(t, ctrlRound(st.LastKnownGood), ctrlRound(lkg), "kill %d: last-known-good went back", kill)
			lkg = st.LastKnownGood
		}
		require.Contains(t, []string{st.Assigned, st.LastKnownGood, ""}, st.Active, "kill %d: active %q; state %+v", kill, st.Active, st)
		if f, bad := st.RejectedHash(st.AssignedHash); bad {
			require.NotEqual(t, st.Assigned, st.Active, "kill %d: the rejected %s is active (%s)", kill, st.Assigned, f.Reason)
		}
	}
	t.Logf("%d SIGKILLs, %d events acknowledged (%d graduations, %d rollbacks); last-known-good %q", kills, events, graduations, rollbacks, lkg)
	require.Greater(t, events, kills/2, "the child made too little progress for the test to mean anything")
	require.Positive(t, graduations)
	require.Positive(t, rollbacks)
}

func readStoreState(t *testing.T, dir string) checkpoint.State {
	t.Helper()
	defer noForks()()
	ctx := context.Background()
	s, err := checkpoint.NewFS(checkpoint.FSConfig{Dir: dir, MaxGenerations: 4})
	require.NoError(t, err)
	require.NoError(t, s.Initialize(ctx))
	defer s.Close()
	st, err := s.State(ctx)
	require.NoError(t, err)
	for _, id := range []string{st.Assigned, st.Active, st.LastKnownGood} {
		if id != "" {
			_, err := s.Load(ctx, id)
			require.NoError(t, err, "load %s", id)
		}
	}
	return st
}

// runCtrlChild starts the controller child, kills it at the point plan
// names, and returns the events it acknowledged (the "boot" line aside).
func runCtrlChild(t *testing.T, dir string, plan killPlan) []string {
	t.Helper()
	var lines []string
	runKilledChild(t, plan.delay, func(l string, kill func()) {
		if strings.HasPrefix(l, "boot ") {
			return
		}
		lines = append(lines, l)
		if len(lines) >= plan.acks && (!plan.inside || strings.HasPrefix(l, "assigned ")) {
			kill()
		}
	}, func() string {
		return fmt.Sprintf("controller child did not reach its kill point (%+v) within %v; said %q", plan, crashChildDeadline, lines)
	}, ctrlChildEnv+"="+dir)
	return lines
}
