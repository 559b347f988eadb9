package checkpoint_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/reconkit/reconkit/checkpoint"
)

// agentConfig is the host configuration of these tests: "level=N".
type agentConfig struct{ Level int }

func parseAgent(b []byte) (agentConfig, error) {
	v, ok := strings.CutPrefix(strings.TrimSpace(string(b)), "level=")
	if !ok {
		return agentConfig{}, fmt.Errorf("want level=N, got %q", b)
	}
	n, err := strconv.Atoi(v)
	return agentConfig{Level: n}, err
}

func validateAgent(c agentConfig) error {
	if c.Level < 1 || c.Level > 9 {
		return fmt.Errorf("level %d out of range 1..9", c.Level)
	}
	return nil
}

const (
	trial    = 10 * time.Minute
	interval = time.Minute
)

var t0 = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

type harness struct {
	t     *testing.T
	clock *clocktesting.FakeClock
	store checkpoint.LKGStore
	ctrl  *checkpoint.Controller[agentConfig]

	probeMu  sync.Mutex
	probeErr error
	probes   int

	statuses chan checkpoint.Status[agentConfig]
	rec      *recorder
	cancel   context.CancelFunc
	done     chan error
}

func newHarness(t *testing.T, store checkpoint.LKGStore, clk *clocktesting.FakeClock) *harness {
	t.Helper()
	h := &harness{t: t, clock: clk, store: store, statuses: make(chan checkpoint.Status[agentConfig], 100), rec: &recorder{}}
	ctrl, err := checkpoint.New(checkpoint.Config[agentConfig]{
		Store:         store,
		Parse:         parseAgent,
		Validate:      validateAgent,
		Local:         agentConfig{Level: 1},
		TrialDuration: trial,
		CheckInterval: interval,
		Probe: func(ctx context.Context, cfg agentConfig) error {
			h.probeMu.Lock()
			defer h.probeMu.Unlock()
			h.probes++
			return h.probeErr
		},
		OnStatus: func(st checkpoint.Status[agentConfig]) {
			select {
			case h.statuses <- st:
			default:
			}
		},
		Metrics:    h.rec,
		Events:     h.rec,
		Conditions: h.rec,
		Clock:      clk,
	})
	require.NoError(t, err)
	h.ctrl = ctrl
	return h
}

func (h *harness) setProbe(err error) {
	h.probeMu.Lock()
	defer h.probeMu.Unlock()
	h.probeErr = err
}

func (h *harness) probeCount() int {
	h.probeMu.Lock()
	defer h.probeMu.Unlock()
	return h.probes
}

// The controller tests run inside a synctest bubble: synctest.Wait returns
// once every goroutine of the controller is blocked (on the fake clock or
// a channel), so a test knows a check has finished without polling or
// assuming how fast the machine is.

func (h *harness) run() {
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel, h.done = cancel, make(chan error, 1)
	go func() { h.done <- h.ctrl.Run(ctx) }()
	synctest.Wait()
}

func (h *harness) stop() {
	h.cancel()
	require.NoError(h.t, <-h.done, "Run returns nil when its context ends")
}

// tick advances the clock by one check interval and waits until the check
// it wakes has finished and everything is blocked again.
func (h *harness) tick() {
	synctest.Wait()
	h.clock.Step(interval)
	synctest.Wait()
}

func (h *harness) requirePhase(p checkpoint.Phase, id string) checkpoint.Status[agentConfig] {
	h.t.Helper()
	st := h.ctrl.Status()
	require.Equal(h.t, p, st.Phase, "status %+v", st)
	require.Equal(h.t, id, st.ID, "status %+v", st)
	return st
}

func (h *harness) requireStored(cur, lkg string) {
	h.t.Helper()
	requireCurLKG(h.t, h.store, cur, lkg)
}

func src(uid, rv string) checkpoint.Source {
	return checkpoint.Source{UID: uid, ResourceVersion: rv, Origin: "test"}
}

func TestNewRejectsBadConfig(t *testing.T) {
	_, err := checkpoint.New(checkpoint.Config[agentConfig]{TrialDuration: -1})
	require.ErrorContains(t, err, "missing Store")
	require.ErrorContains(t, err, "missing Parse")
	require.ErrorContains(t, err, "missing Validate")
	require.ErrorContains(t, err, "TrialDuration")
}

func TestBootstrapLocal(t *testing.T) {
	h := newHarness(t, &checkpoint.MemStore{}, clocktesting.NewFakeClock(t0))
	st, err := h.ctrl.Bootstrap(context.Background())
	require.NoError(t, err)
	require.Equal(t, agentConfig{Level: 1}, st.Config)
	require.Equal(t, checkpoint.PhaseLocal, st.Phase)
	require.Equal(t, checkpoint.ConditionConfigOK, st.Condition.Type)
	require.Equal(t, checkpoint.ConditionTrue, st.Condition.Status)
	require.Equal(t, checkpoint.ReasonLocal, st.Condition.Reason)
	require.True(t, st.Condition.LastTransitionTime.Equal(t0))
}

func TestNewRejectsInvalidLocal(t *testing.T) {
	_, err := checkpoint.New(checkpoint.Config[agentConfig]{
		Store: &checkpoint.MemStore{}, Parse: parseAgent, Validate: validateAgent, Local: agentConfig{Level: 0},
	})
	require.ErrorIs(t, err, checkpoint.ErrInvalidLocal)
	require.ErrorContains(t, err, "level 0 out of range")
}

// TestBootstrapInvalidLocal: a Validate that changes its mind after New
// (it may read the environment) is caught again at Bootstrap.
func TestBootstrapInvalidLocal(t *testing.T) {
	var strict atomic.Bool
	ctrl, err := checkpoint.New(checkpoint.Config[agentConfig]{
		Store: &checkpoint.MemStore{}, Parse: parseAgent, Local: agentConfig{Level: 0},
		Validate: func(c agentConfig) error {
			if !strict.Load() {
				return nil
			}
			return validateAgent(c)
		},
	})
	require.NoError(t, err)
	strict.Store(true)
	_, err = ctrl.Bootstrap(context.Background())
	require.ErrorIs(t, err, checkpoint.ErrInvalidLocal)
	require.ErrorContains(t, err, "level 0 out of range")
	_, err = ctrl.Assign(context.Background(), []byte("level=2"), src("u", "1"))
	require.ErrorIs(t, err, checkpoint.ErrNotBootstrapped)
	require.ErrorIs(t, ctrl.Run(context.Background()), checkpoint.ErrNotBootstrapped)
}

func TestTrialGraduates(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		h := newHarness(t, &checkpoint.MemStore{}, clocktesting.NewFakeClock(t0))
		_, err := h.ctrl.Bootstrap(ctx)
		require.NoError(t, err)
		h.run()
		defer h.stop()

		st, err := h.ctrl.Assign(ctx, []byte("level=5"), src("u1", "10"))
		require.NoError(t, err)
		require.Equal(t, agentConfig{Level: 5}, st.Config)
		require.Equal(t, checkpoint.PhaseTrial, st.Phase)
		require.True(t, st.TrialStart.Equal(t0))
		h.requireStored("u1_10", "")
		rec, err := h.store.State(ctx)
		require.NoError(t, err)
		require.True(t, rec.AssignedAt.Equal(t0), "assignment time recorded in the store: %v", rec.AssignedAt)
		require.Equal(t, checkpoint.DefaultMaxTrialStarts-1, rec.TriesLeft, "the first start is used")

		for range int(trial/interval) - 1 {
			h.tick()
			h.requirePhase(checkpoint.PhaseTrial, "u1_10")
		}
		h.tick() // trial duration reached
		st = h.requirePhase(checkpoint.PhaseLastKnownGood, "u1_10")
		require.Equal(t, checkpoint.ReasonLastKnownGood, st.Condition.Reason)
		require.Equal(t, checkpoint.ConditionTrue, st.Condition.Status)
		h.requireStored("u1_10", "u1_10")
		require.GreaterOrEqual(t, h.probeCount(), int(trial/interval), "probe ran at every check")

		// The host learns of the graduation through OnStatus.
		var last checkpoint.Status[agentConfig]
		for len(h.statuses) > 0 {
			last = <-h.statuses
		}
		require.Equal(t, checkpoint.PhaseLastKnownGood, last.Phase, "newest status delivered to OnStatus")

		// Assigning the same checkpoint again changes nothing.
		again, err := h.ctrl.Assign(ctx, []byte("level=5"), src("u1", "10"))
		require.NoError(t, err)
		require.Equal(t, checkpoint.PhaseLastKnownGood, again.Phase)
	})
}

func TestProbeFailureRollsBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		h := newHarness(t, &checkpoint.MemStore{}, clocktesting.NewFakeClock(t0))
		_, err := h.ctrl.Bootstrap(ctx)
		require.NoError(t, err)
		h.run()
		defer h.stop()

		// A graduates to last-known-good.
		_, err = h.ctrl.Assign(ctx, []byte("level=3"), src("a", "1"))
		require.NoError(t, err)
		for range int(trial / interval) {
			h.tick()
		}
		h.requirePhase(checkpoint.PhaseLastKnownGood, "a_1")

		// B starts its trial and the probe fails half-way.
		_, err = h.ctrl.Assign(ctx, []byte("level=7"), src("b", "2"))
		require.NoError(t, err)
		h.tick()
		h.requirePhase(checkpoint.PhaseTrial, "b_2")
		h.setProbe(errors.New("node not ready"))
		h.tick()
		st := h.requirePhase(checkpoint.PhaseRolledBack, "a_1")
		require.Equal(t, agentConfig{Level: 3}, st.Config)
		require.Equal(t, "b_2", st.Assigned)
		require.Equal(t, checkpoint.ConditionFalse, st.Condition.Status)
		require.Equal(t, checkpoint.ReasonProbeFailed, st.Condition.Reason)
		require.Contains(t, st.Condition.Message, `"b_2"`)
		require.Contains(t, st.Condition.Message, "node not ready")
		require.Contains(t, st.Condition.Message, `last-known-good checkpoint "a_1"`)
		h.requireStored("b_2", "a_1") // B stays assigned, rejected: a restart will not retry it
		rec, err := h.store.State(ctx)
		require.NoError(t, err)
		require.Equal(t, "a_1", rec.Active)
		require.NotNil(t, rec.Error)
		require.Equal(t, checkpoint.HashPayload([]byte("level=7")), rec.Error.Hash)
		require.Equal(t, checkpoint.ReasonProbeFailed, rec.Error.Reason)

		// B is refused from now on; the rollback stays.
		_, err = h.ctrl.Assign(ctx, []byte("level=7"), src("b", "2"))
		require.ErrorIs(t, err, checkpoint.ErrRejected)
		h.setProbe(nil)
		h.tick()
		h.requirePhase(checkpoint.PhaseRolledBack, "a_1")

		// A later, different assignment is tried.
		_, err = h.ctrl.Assign(ctx, []byte("level=8"), src("c", "3"))
		require.NoError(t, err)
		h.requirePhase(checkpoint.PhaseTrial, "c_3")
	})
}

func TestProbeFailureWithoutLKGUsesLocal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		h := newHarness(t, &checkpoint.MemStore{}, clocktesting.NewFakeClock(t0))
		_, err := h.ctrl.Bootstrap(ctx)
		require.NoError(t, err)
		h.run()
		defer h.stop()
		h.setProbe(errors.New("crash loop"))
		_, err = h.ctrl.Assign(ctx, []byte("level=4"), src("a", "1"))
		require.NoError(t, err)
		h.tick()
		st := h.requirePhase(checkpoint.PhaseRolledBack, "")
		require.Equal(t, agentConfig{Level: 1}, st.Config)
		require.Contains(t, st.Condition.Message, "using the local configuration")
		h.requireStored("a_1", "")
	})
}

// TestRestartRestartsTrial: a restart during a trial starts it again,
// timed from the restart, and uses one more start; downtime longer than the
// trial does not let the configuration graduate.
func TestRestartRestartsTrial(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		dir := filepath.Join(t.TempDir(), "store")
		clk := clocktesting.NewFakeClock(t0)
		store := newFS(t, dir, 0)
		h := newHarness(t, store, clk)
		_, err := h.ctrl.Bootstrap(ctx)
		require.NoError(t, err)
		h.run()
		_, err = h.ctrl.Assign(ctx, []byte("level=6"), src("a", "1"))
		require.NoError(t, err)
		for range int(trial/interval) / 2 {
			h.tick()
		}
		h.stop()

		// The host is down for longer than the trial.
		clk.Step(3 * trial)
		h2 := newHarness(t, reopen(t, store, 0), clk)
		st, err := h2.ctrl.Bootstrap(ctx)
		require.NoError(t, err)
		require.Equal(t, checkpoint.PhaseTrial, st.Phase)
		require.Equal(t, agentConfig{Level: 6}, st.Config)
		require.True(t, st.TrialStart.Equal(clk.Now()), "trial start %v, want the restart %v", st.TrialStart, clk.Now())
		require.Equal(t, checkpoint.DefaultMaxTrialStarts-2, st.TriesLeft)
		h2.run() // checks at once: one probe does not graduate
		h2.requirePhase(checkpoint.PhaseTrial, "a_1")
		for range int(trial/interval) - 1 {
			h2.tick()
			h2.requirePhase(checkpoint.PhaseTrial, "a_1")
		}
		h2.tick() // a whole trial observed by this process
		h2.requirePhase(checkpoint.PhaseLastKnownGood, "a_1")
		h2.requireStored("a_1", "a_1")
		h2.stop()
	})
}

// TestCrashLoopRollsBack: a configuration that never finishes its trial
// (the host dies during every trial) is rolled back after MaxTrialStarts
// starts, for its own reason, and stays rolled back.
func TestCrashLoopRollsBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		dir := filepath.Join(t.TempDir(), "store")
		clk := clocktesting.NewFakeClock(t0)
		store := newFS(t, dir, 0)
		h := newHarness(t, store, clk)
		_, err := h.ctrl.Bootstrap(ctx)
		require.NoError(t, err)
		h.run()
		_, err = h.ctrl.Assign(ctx, []byte("level=3"), src("good", "1"))
		require.NoError(t, err)
		for range int(trial / interval) {
			h.tick()
		}
		h.requirePhase(checkpoint.PhaseLastKnownGood, "good_1")
		_, err = h.ctrl.Assign(ctx, []byte("level=8"), src("bad", "2"))
		require.NoError(t, err)
		h.stop() // the host crashes during the trial (start 1)

		for start := 2; start <= checkpoint.DefaultMaxTrialStarts; start++ {
			clk.Step(time.Hour)
			store = reopen(t, store, 0)
			st, err := newHarness(t, store, clk).ctrl.Bootstrap(ctx)
			require.NoError(t, err)
			require.Equal(t, checkpoint.PhaseTrial, st.Phase, "start %d", start)
			require.Equal(t, "bad_2", st.ID)
			require.Equal(t, checkpoint.DefaultMaxTrialStarts-start, st.TriesLeft)
		}
		for range 3 { // every later start stays rolled back
			clk.Step(time.Hour)
			store = reopen(t, store, 0)
			h = newHarness(t, store, clk)
			st, err := h.ctrl.Bootstrap(ctx)
			require.NoError(t, err)
			require.Equal(t, checkpoint.PhaseRolledBack, st.Phase)
			require.Equal(t, "good_1", st.ID)
			require.Equal(t, agentConfig{Level: 3}, st.Config)
			require.Equal(t, "bad_2", st.Assigned)
			require.Equal(t, checkpoint.ConditionFalse, st.Condition.Status)
			require.Equal(t, checkpoint.ReasonCrashLoop, st.Condition.Reason)
			require.Contains(t, st.Condition.Message, `"bad_2"`)
			require.Contains(t, st.Condition.Message, "crash loop")
			h.requireStored("bad_2", "good_1")
		}
		_, err = h.ctrl.Assign(ctx, []byte("level=8"), src("bad", "2"))
		require.ErrorIs(t, err, checkpoint.ErrRejected)
	})
}

// TestRollbackSurvivesRestarts: after a rollback, restarts keep the
// rollback and its reason, and a source that keeps delivering the failed
// payload never gets it tried again.
func TestRollbackSurvivesRestarts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		dir := filepath.Join(t.TempDir(), "store")
		clk := clocktesting.NewFakeClock(t0)
		source := &fakeSource{}
		source.set("level=3", src("cm", "1"), nil)
		newCtrl := func(store checkpoint.LKGStore, probe func() error) (*checkpoint.Controller[agentConfig], *int) {
			probes := new(int)
			ctrl, err := checkpoint.New(checkpoint.Config[agentConfig]{
				Store: store, Parse: parseAgent, Validate: validateAgent, Local: agentConfig{Level: 1},
				TrialDuration: trial, CheckInterval: interval, Source: &checkpoint.PollSource{Fetch: source.Fetch, Interval: interval, Clock: clk}, Clock: clk,
				Probe: func(context.Context, agentConfig) error { *probes++; return probe() },
			})
			require.NoError(t, err)
			return ctrl, probes
		}
		runFor := func(ctrl *checkpoint.Controller[agentConfig], steps int) {
			runCtx, cancel := context.WithCancel(ctx)
			done := make(chan error, 1)
			go func() { done <- ctrl.Run(runCtx) }()
			synctest.Wait()
			for range steps {
				clk.Step(interval)
				synctest.Wait()
			}
			cancel()
			require.NoError(t, <-done, "Run returns nil when its context ends")
		}

		store := newFS(t, dir, 0)
		ctrl, _ := newCtrl(store, func() error { return nil })
		_, err := ctrl.Bootstrap(ctx)
		require.NoError(t, err)
		runFor(ctrl, 2*int(trial/interval))
		require.Equal(t, checkpoint.PhaseLastKnownGood, ctrl.Status().Phase)

		source.set("level=7", src("cm", "2"), nil)
		ctrl2, _ := newCtrl(store, func() error { return errors.New("node not ready") })
		_, err = ctrl2.Bootstrap(ctx)
		require.NoError(t, err)
		runFor(ctrl2, 3)
		require.Equal(t, checkpoint.PhaseRolledBack, ctrl2.Status().Phase)

		for restart := range 3 {
			store = reopen(t, store, 0)
			ctrl, probes := newCtrl(store, func() error { return nil })
			st, err := ctrl.Bootstrap(ctx)
			require.NoError(t, err)
			require.Equal(t, checkpoint.PhaseRolledBack, st.Phase, "restart %d", restart)
			require.Equal(t, "cm_1", st.ID)
			require.Equal(t, checkpoint.ConditionFalse, st.Condition.Status)
			require.Equal(t, checkpoint.ReasonProbeFailed, st.Condition.Reason)
			require.Contains(t, st.Condition.Message, "node not ready")
			runFor(ctrl, 3) // the source re-delivers level=7 at every poll
			require.Zero(t, *probes, "the rejected payload was tried again")
			st = ctrl.Status()
			require.Equal(t, checkpoint.PhaseRolledBack, st.Phase)
			require.Equal(t, checkpoint.ReasonProbeFailed, st.Condition.Reason)
		}
	})
}

// TestRejectionKeyedByHash: the refusal follows the payload, not the
// checkpoint ID, and reverting to good content clears the error at once.
func TestRejectionKeyedByHash(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		h := newHarness(t, &checkpoint.MemStore{}, clocktesting.NewFakeClock(t0))
		_, err := h.ctrl.Bootstrap(ctx)
		require.NoError(t, err)
		h.run()
		defer h.stop()
		_, err = h.ctrl.Assign(ctx, []byte("level=3"), src("cm", "1"))
		require.NoError(t, err)
		for range int(trial / interval) {
			h.tick()
		}
		_, err = h.ctrl.Assign(ctx, []byte("level=7"), src("cm", "2"))
		require.NoError(t, err)
		h.setProbe(errors.New("node not ready"))
		h.tick()
		h.requirePhase(checkpoint.PhaseRolledBack, "cm_1")
		h.setProbe(nil)

		// A metadata-only edit: same payload, new resourceVersion.
		st, err := h.ctrl.Assign(ctx, []byte("level=7"), src("cm", "3"))
		require.ErrorIs(t, err, checkpoint.ErrRejected)
		require.Equal(t, checkpoint.ReasonProbeFailed, st.Condition.Reason)
		require.Contains(t, st.Condition.Message, `"cm_3"`)
		require.Contains(t, st.Condition.Message, `"cm_2"`)
		require.Zero(t, h.probeCount()-int(trial/interval)-1, "not tried again")

		// Reverted to the good content under yet another version.
		st, err = h.ctrl.Assign(ctx, []byte("level=3"), src("cm", "4"))
		require.NoError(t, err)
		require.Equal(t, checkpoint.PhaseLastKnownGood, st.Phase)
		require.Equal(t, "cm_1", st.ID)
		require.Equal(t, checkpoint.ConditionTrue, st.Condition.Status)
		require.Equal(t, checkpoint.ReasonLastKnownGood, st.Condition.Reason)
		rec, err := h.store.State(ctx)
		require.NoError(t, err)
		require.Nil(t, rec.Error)
		require.Equal(t, "cm_1", rec.Assigned)
	})
}

// TestConfirmAndRollback: an operator ends a trial by hand.
func TestConfirmAndRollback(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		h := newHarness(t, &checkpoint.MemStore{}, clocktesting.NewFakeClock(t0))
		_, err := h.ctrl.Bootstrap(ctx)
		require.NoError(t, err)
		_, err = h.ctrl.Confirm(ctx)
		require.ErrorIs(t, err, checkpoint.ErrNoTrial)
		_, err = h.ctrl.Rollback(ctx, "x")
		require.ErrorIs(t, err, checkpoint.ErrNoTrial)

		_, err = h.ctrl.Assign(ctx, []byte("level=4"), src("a", "1"))
		require.NoError(t, err)
		st, err := h.ctrl.Confirm(ctx)
		require.NoError(t, err)
		require.Equal(t, checkpoint.PhaseLastKnownGood, st.Phase)
		require.Contains(t, st.Condition.Message, "confirmed")
		h.requireStored("a_1", "a_1")

		_, err = h.ctrl.Assign(ctx, []byte("level=5"), src("b", "2"))
		require.NoError(t, err)
		st, err = h.ctrl.Rollback(ctx, "latency doubled")
		require.NoError(t, err)
		require.Equal(t, checkpoint.PhaseRolledBack, st.Phase)
		require.Equal(t, "a_1", st.ID)
		require.Equal(t, checkpoint.ReasonManualRollback, st.Condition.Reason)
		require.Contains(t, st.Condition.Message, "latency doubled")
		h.requireStored("b_2", "a_1")
		_, err = h.ctrl.Assign(ctx, []byte("level=5"), src("b", "3"))
		require.ErrorIs(t, err, checkpoint.ErrRejected)
	})
}

// TestSourceWithoutUID: payloads from a source without stable identity are
// named by their hash.
func TestSourceWithoutUID(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, &checkpoint.MemStore{}, clocktesting.NewFakeClock(t0))
	_, err := h.ctrl.Bootstrap(ctx)
	require.NoError(t, err)
	st, err := h.ctrl.Assign(ctx, []byte("level=4"), checkpoint.Source{Origin: "fake"})
	require.NoError(t, err)
	require.Equal(t, checkpoint.HashID([]byte("level=4")), st.ID)
	st, err = h.ctrl.Assign(ctx, []byte("level=5"), checkpoint.Source{UID: "a/b", Origin: "fake"})
	require.ErrorIs(t, err, checkpoint.ErrInvalidID)
	require.Equal(t, checkpoint.ReasonSourceInvalid, st.Condition.Reason)
	require.Equal(t, checkpoint.ConditionFalse, st.Condition.Status)
	require.Contains(t, st.Condition.Message, `invalid checkpoint ID: "a/b"`, "the ID error is in the condition")
	require.Equal(t, checkpoint.PhaseTrial, st.Phase, "still running what ran")
	_, _, conds := h.rec.take()
	require.Equal(t, "ConfigOK False "+checkpoint.ReasonSourceInvalid+": "+st.Condition.Message, conds[len(conds)-1],
		"the ID error reaches the condition reporter")
}

func TestAssignInvalidStoresNothing(t *testing.T) {
	ctx := context.Background()
	store := &checkpoint.MemStore{}
	h := newHarness(t, store, clocktesting.NewFakeClock(t0))
	_, err := h.ctrl.Bootstrap(ctx)
	require.NoError(t, err)
	for _, tc := range []struct {
		payload, reason string
	}{
		{"nonsense", checkpoint.ReasonParseFailed},
		{"level=42", checkpoint.ReasonValidateFailed},
	} {
		st, err := h.ctrl.Assign(ctx, []byte(tc.payload), src("x-"+tc.reason, "1"))
		require.ErrorIs(t, err, checkpoint.ErrInvalidConfig)
		require.Equal(t, tc.reason, st.Condition.Reason)
		require.Equal(t, checkpoint.ConditionFalse, st.Condition.Status)
		require.Contains(t, st.Condition.Message, `"x-`+tc.reason+`_1"`)
		require.Equal(t, checkpoint.PhaseLocal, st.Phase, "still running local")
		_, err = store.Load(ctx, "x-"+tc.reason+"_1")
		require.ErrorIs(t, err, checkpoint.ErrNotFound)
	}
	h.requireStored("", "")
	_, err = h.ctrl.Assign(ctx, []byte("level=2"), checkpoint.Source{UID: "../evil"})
	require.ErrorIs(t, err, checkpoint.ErrInvalidID)
}

// TestBootstrapFallsBack damages the assigned checkpoint in every way and
// checks that Bootstrap runs last-known-good (or local) and says why.
func TestBootstrapFallsBack(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name       string
		bPayload   string
		damage     func(t *testing.T, dir string)
		wantID     string
		wantLevel  int
		wantReason string
		wantMsg    []string
	}{
		{name: "truncated", bPayload: "level=7", damage: func(t *testing.T, dir string) {
			f := checkpointFile(t, dir, "b_2")
			data, err := os.ReadFile(f)
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(f, data[:len(data)-2], 0o600))
		}, wantID: "a_1", wantLevel: 3, wantReason: checkpoint.ReasonLoadFailed,
			wantMsg: []string{`failed to load assigned checkpoint "b_2"`, "truncated", `using last-known-good checkpoint "a_1"`}},
		{name: "bit flip", bPayload: "level=7", damage: func(t *testing.T, dir string) {
			flipLastByte(t, checkpointFile(t, dir, "b_2"))
		}, wantID: "a_1", wantLevel: 3, wantReason: checkpoint.ReasonLoadFailed,
			wantMsg: []string{`"b_2"`, "hash"}},
		{name: "missing file", bPayload: "level=7", damage: func(t *testing.T, dir string) {
			require.NoError(t, os.Remove(checkpointFile(t, dir, "b_2")))
		}, wantID: "a_1", wantLevel: 3, wantReason: checkpoint.ReasonLoadFailed,
			wantMsg: []string{`"b_2"`, "missing"}},
		{name: "parse", bPayload: "garbage", wantID: "a_1", wantLevel: 3, wantReason: checkpoint.ReasonParseFailed,
			wantMsg: []string{`failed to parse assigned checkpoint "b_2"`}},
		{name: "validate", bPayload: "level=99", wantID: "a_1", wantLevel: 3, wantReason: checkpoint.ReasonValidateFailed,
			wantMsg: []string{`failed to validate assigned checkpoint "b_2"`, "level 99"}},
		{name: "last-known-good damaged too", bPayload: "level=7", damage: func(t *testing.T, dir string) {
			flipLastByte(t, checkpointFile(t, dir, "b_2"))
			flipLastByte(t, checkpointFile(t, dir, "a_1"))
		}, wantID: "", wantLevel: 1, wantReason: checkpoint.ReasonLKGFailed,
			wantMsg: []string{`"b_2"`, `last-known-good checkpoint "a_1"`, "using the local configuration"}},
		{name: "checkpoints directory missing", bPayload: "level=7", damage: func(t *testing.T, dir string) {
			require.NoError(t, os.RemoveAll(filepath.Join(dir, "checkpoints")))
		}, wantID: "", wantLevel: 1, wantReason: checkpoint.ReasonLKGFailed,
			wantMsg: []string{`"b_2"`, "no file", "using the local configuration"}},
		{name: "metadata damaged", bPayload: "level=7", damage: func(t *testing.T, dir string) {
			flipLastByte(t, filepath.Join(dir, "state-a"))
			flipLastByte(t, filepath.Join(dir, "state-b"))
		}, wantID: "", wantLevel: 1, wantReason: checkpoint.ReasonStoreUnavailable,
			wantMsg: []string{"checksum", "using the local configuration"}},
		{name: "store directory unusable", bPayload: "level=7", damage: func(t *testing.T, dir string) {
			require.NoError(t, os.RemoveAll(dir))
			require.NoError(t, os.WriteFile(dir, []byte("not a directory"), 0o600))
		}, wantID: "", wantLevel: 1, wantReason: checkpoint.ReasonStoreUnavailable,
			wantMsg: []string{"not a directory"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				dir := filepath.Join(t.TempDir(), "store")
				s := newFS(t, dir, 0)
				for _, c := range []struct{ id, payload string }{{"a_1", "level=3"}, {"b_2", tc.bPayload}} {
					require.NoError(t, s.Save(ctx, checkpoint.Checkpoint{ID: c.id, Payload: []byte(c.payload)}))
				}
				setRefs(t, s, "b_2", "a_1")
				require.NoError(t, s.Close())
				if tc.damage != nil {
					tc.damage(t, dir)
				}
				store, err := checkpoint.NewFS(checkpoint.FSConfig{Dir: dir})
				require.NoError(t, err)
				h := newHarness(t, store, clocktesting.NewFakeClock(t0))
				st, err := h.ctrl.Bootstrap(ctx)
				require.NoError(t, err, "Bootstrap must fall back, not fail")
				require.Equal(t, checkpoint.PhaseRolledBack, st.Phase)
				require.Equal(t, tc.wantID, st.ID)
				require.Equal(t, tc.wantLevel, st.Config.Level)
				require.Equal(t, checkpoint.ConditionFalse, st.Condition.Status)
				require.Equal(t, tc.wantReason, st.Condition.Reason, st.Condition.Message)
				for _, m := range tc.wantMsg {
					require.Contains(t, st.Condition.Message, m)
				}
				// Nothing runs on trial after a fallback.
				h.run()
				h.tick()
				require.Equal(t, checkpoint.PhaseRolledBack, h.ctrl.Status().Phase)
				require.Zero(t, h.probeCount())
				h.stop()
			})
		})
	}
}

func TestBootstrapStableLKG(t *testing.T) {
	ctx := context.Background()
	store := &checkpoint.MemStore{}
	require.NoError(t, store.Save(ctx, checkpoint.Checkpoint{ID: "a", Payload: []byte("level=4")}))
	setRefs(t, store, "a", "a")
	h := newHarness(t, store, clocktesting.NewFakeClock(t0))
	st, err := h.ctrl.Bootstrap(ctx)
	require.NoError(t, err)
	require.Equal(t, checkpoint.PhaseLastKnownGood, st.Phase)
	require.Equal(t, 4, st.Config.Level)
	require.Equal(t, checkpoint.ReasonLastKnownGood, st.Condition.Reason)
}

func TestRunTwiceAndCancel(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, &checkpoint.MemStore{}, clocktesting.NewFakeClock(t0))
		_, err := h.ctrl.Bootstrap(context.Background())
		require.NoError(t, err)
		h.run()
		require.ErrorIs(t, h.ctrl.Run(context.Background()), checkpoint.ErrRunning)
		h.stop()
		// Run may be started again after it returned.
		h.run()
		h.stop()
	})
}

type fakeSource struct {
	mu      sync.Mutex
	payload string
	src     checkpoint.Source
	err     error
}

func (f *fakeSource) set(payload string, s checkpoint.Source, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.payload, f.src, f.err = payload, s, err
}

func (f *fakeSource) Fetch(context.Context) ([]byte, checkpoint.Source, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return []byte(f.payload), f.src, f.err
}

func TestRunPollsSource(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		clk := clocktesting.NewFakeClock(t0)
		source := &fakeSource{}
		source.set("", checkpoint.Source{}, fmt.Errorf("nothing: %w", checkpoint.ErrNotFound))
		ctrl, err := checkpoint.New(checkpoint.Config[agentConfig]{
			Store: &checkpoint.MemStore{}, Parse: parseAgent, Validate: validateAgent, Local: agentConfig{Level: 1},
			TrialDuration: trial, CheckInterval: interval, Source: &checkpoint.PollSource{Fetch: source.Fetch, Interval: interval, Clock: clk}, Clock: clk,
		})
		require.NoError(t, err)
		_, err = ctrl.Bootstrap(ctx)
		require.NoError(t, err)
		runCtx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- ctrl.Run(runCtx) }()
		defer func() {
			cancel()
			require.NoError(t, <-done, "Run returns nil when its context ends")
		}()
		synctest.Wait()
		require.Equal(t, checkpoint.PhaseLocal, ctrl.Status().Phase)

		source.set("level=9", src("cm", "5"), nil)
		// The source loop sleeps up to 1.1 intervals (jitter); two steps cover it.
		clk.Step(interval)
		synctest.Wait()
		clk.Step(interval)
		synctest.Wait()
		require.Equal(t, "cm_5", ctrl.Status().ID)
		require.Equal(t, 9, ctrl.Status().Config.Level)
	})
}

// flakyStore fails SetState while failing is set.
type flakyStore struct {
	checkpoint.MemStore
	mu      sync.Mutex
	failing bool
}

func (s *flakyStore) setFailing(v bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failing = v
}

func (s *flakyStore) SetState(ctx context.Context, st checkpoint.State) error {
	s.mu.Lock()
	failing := s.failing
	s.mu.Unlock()
	if failing {
		return errors.New("disk full")
	}
	return s.MemStore.SetState(ctx, st)
}

// TestStoreFailures: a trial whose start cannot be recorded does not
// start; a graduation that cannot be recorded does not happen until it
// can; a rollback that cannot be recorded stands and is recorded later.
func TestStoreFailures(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		store := &flakyStore{}
		h := newHarness(t, store, clocktesting.NewFakeClock(t0))
		_, err := h.ctrl.Bootstrap(ctx)
		require.NoError(t, err)
		h.run()
		defer h.stop()

		// Graduation waits for the record.
		_, err = h.ctrl.Assign(ctx, []byte("level=3"), src("a", "1"))
		require.NoError(t, err)
		store.setFailing(true)
		for range int(trial/interval) + 2 {
			h.tick()
		}
		h.requirePhase(checkpoint.PhaseTrial, "a_1")
		h.requireStored("a_1", "")
		store.setFailing(false)
		h.tick()
		h.requirePhase(checkpoint.PhaseLastKnownGood, "a_1")
		h.requireStored("a_1", "a_1")

		// A failed assignment changes nothing.
		store.setFailing(true)
		_, err = h.ctrl.Assign(ctx, []byte("level=7"), src("b", "2"))
		require.ErrorContains(t, err, "disk full")
		h.requirePhase(checkpoint.PhaseLastKnownGood, "a_1")

		// A rollback stands at once and is recorded once the store works.
		store.setFailing(false)
		_, err = h.ctrl.Assign(ctx, []byte("level=7"), src("b", "2"))
		require.NoError(t, err)
		store.setFailing(true)
		h.setProbe(errors.New("node not ready"))
		h.tick()
		h.requirePhase(checkpoint.PhaseRolledBack, "a_1")
		rec, err := store.State(ctx)
		require.NoError(t, err)
		require.Nil(t, rec.Error, "not recorded yet")
		store.setFailing(false)
		h.tick()
		rec, err = store.State(ctx)
		require.NoError(t, err)
		require.NotNil(t, rec.Error, "recorded at the next check")
		require.Equal(t, "a_1", rec.Active)
	})

	t.Run("trial start not recorded", func(t *testing.T) {
		ctx := context.Background()
		store := &flakyStore{}
		require.NoError(t, store.Save(ctx, checkpoint.Checkpoint{ID: "a", Payload: []byte("level=4")}))
		require.NoError(t, store.Save(ctx, checkpoint.Checkpoint{ID: "b", Payload: []byte("level=6")}))
		setRefs(t, store, "b", "a")
		rec, err := store.State(ctx)
		require.NoError(t, err)
		rec.TriesLeft = 2
		require.NoError(t, store.SetState(ctx, rec))
		store.setFailing(true)
		h := newHarness(t, store, clocktesting.NewFakeClock(t0))
		st, err := h.ctrl.Bootstrap(ctx)
		require.NoError(t, err)
		require.Equal(t, checkpoint.PhaseRolledBack, st.Phase)
		require.Equal(t, "a", st.ID, "last-known-good runs instead")
		require.Equal(t, checkpoint.ReasonStoreUnavailable, st.Condition.Reason)
		require.Contains(t, st.Condition.Message, "cannot record the start of the trial")
	})
}

// TestRunLifecycle: Run returns nil when its context ends, and a wrapped
// error, having stopped its other goroutines, when its source fails for
// good.
func TestRunLifecycle(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, &checkpoint.MemStore{}, clocktesting.NewFakeClock(t0))
		_, err := h.ctrl.Bootstrap(context.Background())
		require.NoError(t, err)
		h.run()
		h.stop() // requires nil

		ctrl, err := checkpoint.New(checkpoint.Config[agentConfig]{
			Store: &checkpoint.MemStore{}, Parse: parseAgent, Validate: validateAgent, Local: agentConfig{Level: 1},
			Source: &checkpoint.PollSource{}, // no Fetch: Watch fails at once
			Clock:  clocktesting.NewFakeClock(t0),
		})
		require.NoError(t, err)
		_, err = ctrl.Bootstrap(context.Background())
		require.NoError(t, err)
		err = ctrl.Run(context.Background()) // returns on its own: the source failed
		require.ErrorContains(t, err, "Fetch is required")
		require.ErrorContains(t, err, "checkpoint: run")
	})
}

// TestSourceReusingID: a source that delivers other content under an ID it
// used before (an origin that does not bump its version) gets the new
// payload assigned under its hash, not refused as a conflict.
func TestSourceReusingID(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, &checkpoint.MemStore{}, clocktesting.NewFakeClock(t0))
	_, err := h.ctrl.Bootstrap(ctx)
	require.NoError(t, err)
	_, err = h.ctrl.Assign(ctx, []byte("level=4"), src("u", "1"))
	require.NoError(t, err)
	st, err := h.ctrl.Assign(ctx, []byte("level=5"), src("u", "1"))
	require.NoError(t, err)
	require.Equal(t, checkpoint.HashID([]byte("level=5")), st.ID)
	require.Equal(t, agentConfig{Level: 5}, st.Config)
	require.Equal(t, checkpoint.PhaseTrial, st.Phase)
	h.requireStored(st.ID, "")
}
