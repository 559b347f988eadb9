package checkpoint_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/reconkit/reconkit/checkpoint"
)

// recorder is the Metrics, EventRecorder and ConditionReporter of the
// controller tests. take returns what was reported since the last take.
type recorder struct {
	mu         sync.Mutex
	obs        []checkpoint.Observation
	events     []string // "Normal ConfigTrialStarted: message"
	conditions []string // "ConfigOK True LocalConfig: message"
}

func (r *recorder) Observe(o checkpoint.Observation) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.obs = append(r.obs, o)
}

func (r *recorder) Event(eventtype, reason, message string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, eventtype+" "+reason+": "+message)
}

func (r *recorder) ReportCondition(conditionType, status, reason, message string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.conditions = append(r.conditions, conditionType+" "+status+" "+reason+": "+message)
}

func (r *recorder) take() (obs []checkpoint.Observation, events, conditions []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	obs, events, conditions = r.obs, r.events, r.conditions
	r.obs, r.events, r.conditions = nil, nil, nil
	return obs, events, conditions
}

// brief drops the messages, which other tests check.
func brief(lines []string) []string {
	var out []string
	for _, l := range lines {
		head, _, _ := strings.Cut(l, ":")
		out = append(out, head)
	}
	return out
}

// TestObservations drives a controller through start, a trial that
// passes, a trial that fails and a manual confirmation, and checks what
// it reported to Metrics, Events and Conditions at each step.
func TestObservations(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		h := newHarness(t, &checkpoint.MemStore{}, clocktesting.NewFakeClock(t0))
		_, err := h.ctrl.Bootstrap(ctx)
		require.NoError(t, err)
		obs, events, conds := h.rec.take()
		require.Equal(t, []checkpoint.Observation{{Event: checkpoint.EventPhase, Phase: checkpoint.PhaseLocal}}, obs, "phase at start")
		require.Empty(t, events)
		require.Equal(t, []string{"ConfigOK True LocalConfig"}, brief(conds), "condition at start")
		h.run()
		defer h.stop()
		h.tick()
		obs, events, conds = h.rec.take()
		require.Empty(t, obs, "nothing changed")
		require.Empty(t, events, "nothing changed")
		require.Empty(t, conds, "an unchanged condition is not reported again")

		// a_1 starts its trial and passes it.
		_, err = h.ctrl.Assign(ctx, []byte("level=3"), src("a", "1"))
		require.NoError(t, err)
		obs, events, conds = h.rec.take()
		require.Equal(t, []checkpoint.Observation{
			{Event: checkpoint.EventPhase, Phase: checkpoint.PhaseTrial, ID: "a_1"},
			{Event: checkpoint.EventTrialStarted, Phase: checkpoint.PhaseTrial, ID: "a_1", TriesLeft: checkpoint.DefaultMaxTrialStarts - 1},
		}, obs)
		require.Equal(t, []string{"Normal ConfigTrialStarted"}, brief(events))
		require.Contains(t, events[0], `"a_1" on trial`)
		require.Equal(t, []string{"ConfigOK True AssignedOnTrial"}, brief(conds))
		for range int(trial/interval) - 1 {
			h.tick()
		}
		obs, events, conds = h.rec.take()
		require.Empty(t, obs, "no change during the trial")
		require.Empty(t, events)
		require.Empty(t, conds)
		h.tick()
		obs, events, conds = h.rec.take()
		require.Equal(t, []checkpoint.Observation{
			{Event: checkpoint.EventPhase, Phase: checkpoint.PhaseLastKnownGood, ID: "a_1"},
			{Event: checkpoint.EventConfirmed, Phase: checkpoint.PhaseLastKnownGood, ID: "a_1", TrialTime: trial},
		}, obs)
		require.Equal(t, []string{"Normal ConfigConfirmed"}, brief(events))
		require.Equal(t, []string{"ConfigOK True AssignedLastKnownGood"}, brief(conds))

		// b_2's probe fails two checks into its trial.
		_, err = h.ctrl.Assign(ctx, []byte("level=7"), src("b", "2"))
		require.NoError(t, err)
		h.tick()
		h.setProbe(errors.New("node not ready"))
		h.tick()
		obs, events, conds = h.rec.take()
		require.Equal(t, []checkpoint.Observation{
			{Event: checkpoint.EventPhase, Phase: checkpoint.PhaseTrial, ID: "b_2"},
			{Event: checkpoint.EventTrialStarted, Phase: checkpoint.PhaseTrial, ID: "b_2", TriesLeft: checkpoint.DefaultMaxTrialStarts - 1},
			{Event: checkpoint.EventPhase, Phase: checkpoint.PhaseRolledBack, ID: "a_1"},
			{Event: checkpoint.EventRolledBack, Phase: checkpoint.PhaseRolledBack, ID: "b_2", Reason: checkpoint.ReasonProbeFailed, TrialTime: 2 * interval},
		}, obs)
		require.Equal(t, []string{"Normal ConfigTrialStarted", "Warning ConfigRolledBack"}, brief(events))
		require.Contains(t, events[1], "TrialProbeFailed: health probe failed during the trial of checkpoint \"b_2\": node not ready")
		require.Equal(t, []string{"ConfigOK True AssignedOnTrial", "ConfigOK False TrialProbeFailed"}, brief(conds))
		require.Contains(t, conds[1], "node not ready")

		// A refused assignment changes the condition only.
		_, err = h.ctrl.Assign(ctx, []byte("level=7"), src("b", "3"))
		require.ErrorIs(t, err, checkpoint.ErrRejected)
		obs, events, conds = h.rec.take()
		require.Empty(t, obs)
		require.Empty(t, events)
		require.Len(t, conds, 1)
		require.Contains(t, conds[0], `"b_3" from test has the payload of checkpoint "b_2"`)
		_, err = h.ctrl.Assign(ctx, []byte("level=7"), src("b", "3"))
		require.ErrorIs(t, err, checkpoint.ErrRejected)
		_, _, conds = h.rec.take()
		require.Empty(t, conds, "the same refusal again does not change the condition")

		// c_4 is confirmed by hand after five minutes.
		h.setProbe(nil)
		_, err = h.ctrl.Assign(ctx, []byte("level=8"), src("c", "4"))
		require.NoError(t, err)
		for range 5 {
			h.tick()
		}
		h.rec.take()
		_, err = h.ctrl.Confirm(ctx)
		require.NoError(t, err)
		obs, events, _ = h.rec.take()
		require.Equal(t, []checkpoint.Observation{
			{Event: checkpoint.EventPhase, Phase: checkpoint.PhaseLastKnownGood, ID: "c_4"},
			{Event: checkpoint.EventConfirmed, Phase: checkpoint.PhaseLastKnownGood, ID: "c_4", TrialTime: 5 * interval},
		}, obs)
		require.Equal(t, []string{"Normal ConfigConfirmed"}, brief(events))
	})
}

// TestObservationsAcrossRestarts: each start of a resumed trial is
// reported with the starts left, and the crash-loop rollback once, with no
// trial time, at the Bootstrap that decides it; later starts report the
// phase only.
func TestObservationsAcrossRestarts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		clk := clocktesting.NewFakeClock(t0)
		store := newFS(t, filepath.Join(t.TempDir(), "store"), 0)
		h := newHarness(t, store, clk)
		_, err := h.ctrl.Bootstrap(ctx)
		require.NoError(t, err)
		_, err = h.ctrl.Assign(ctx, []byte("level=8"), src("bad", "2"))
		require.NoError(t, err)
		for start := 2; start <= checkpoint.DefaultMaxTrialStarts+2; start++ {
			clk.Step(time.Hour)
			store = reopen(t, store, 0)
			h = newHarness(t, store, clk)
			_, err := h.ctrl.Bootstrap(ctx)
			require.NoError(t, err)
			obs, events, conds := h.rec.take()
			var want []checkpoint.Observation
			var wantEvents, wantConds []string
			switch {
			case start <= checkpoint.DefaultMaxTrialStarts:
				left := checkpoint.DefaultMaxTrialStarts - start
				want = []checkpoint.Observation{
					{Event: checkpoint.EventPhase, Phase: checkpoint.PhaseTrial, ID: "bad_2"},
					{Event: checkpoint.EventTrialStarted, Phase: checkpoint.PhaseTrial, ID: "bad_2", TriesLeft: left},
				}
				wantEvents = []string{"Normal ConfigTrialStarted"}
				wantConds = []string{"ConfigOK True AssignedOnTrial"}
				require.Contains(t, events[0], fmt.Sprintf("(%d more starts allowed)", left))
			case start == checkpoint.DefaultMaxTrialStarts+1:
				want = []checkpoint.Observation{
					{Event: checkpoint.EventPhase, Phase: checkpoint.PhaseRolledBack},
					{Event: checkpoint.EventRolledBack, Phase: checkpoint.PhaseRolledBack, ID: "bad_2", Reason: checkpoint.ReasonCrashLoop},
				}
				wantEvents = []string{"Warning ConfigRolledBack"}
				wantConds = []string{"ConfigOK False TrialCrashLoop"}
			default: // rolled back before: not counted again
				want = []checkpoint.Observation{{Event: checkpoint.EventPhase, Phase: checkpoint.PhaseRolledBack}}
				wantConds = []string{"ConfigOK False TrialCrashLoop"}
			}
			require.Equal(t, want, obs, "start %d", start)
			require.Equal(t, wantEvents, brief(events), "start %d", start)
			require.Equal(t, wantConds, brief(conds), "start %d", start)
		}
	})
}
