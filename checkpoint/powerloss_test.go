package checkpoint_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconkit/reconkit/checkpoint"
	"github.com/reconkit/reconkit/checkpoint/checkpointtest"
)

// The power-loss tests run a script of store operations on a StrictFS,
// crash it (dropping everything not made durable) at every sync point the
// script passes, reopen the store and check that it holds exactly the
// state after the last acknowledged operation or after the next one.

const plDir = "/var/lib/agent/store"

func plPayload(i int) []byte { return fmt.Appendf(nil, "level=%d", i) }

func plID(i int) string { return fmt.Sprintf("c%d", i) }

func plHash(i int) string {
	if i == 0 {
		return ""
	}
	return checkpoint.HashPayload(plPayload(i))
}

// plModel is what the store holds after a step: the record's references
// and which checkpoints are stored (with their payloads).
type plModel struct {
	assigned, active, lkg string
	triesLeft             int
	rejected              int
	stored                []string
}

type plStep struct {
	name string
	do   func(ctx context.Context, s *checkpoint.FSStore) error
	// after is the model once the step has returned nil.
	after plModel
}

func plState(assigned, active, lkg int, tries int) checkpoint.State {
	id := func(i int) string {
		if i == 0 {
			return ""
		}
		return plID(i)
	}
	return checkpoint.State{
		Assigned: id(assigned), AssignedHash: plHash(assigned), AssignedAt: time.Unix(int64(assigned), 0),
		Active: id(active), LastKnownGood: id(lkg), LastKnownGoodHash: plHash(lkg), TriesLeft: tries,
	}
}

func plSave(i int) func(ctx context.Context, s *checkpoint.FSStore) error {
	return func(ctx context.Context, s *checkpoint.FSStore) error {
		return s.Save(ctx, checkpoint.Checkpoint{ID: plID(i), Payload: plPayload(i)})
	}
}

func plSaveOn(ctx context.Context, i int) func(s *checkpoint.FSStore) error {
	return func(s *checkpoint.FSStore) error { return plSave(i)(ctx, s) }
}

func plSet(st checkpoint.State) func(ctx context.Context, s *checkpoint.FSStore) error {
	return func(ctx context.Context, s *checkpoint.FSStore) error { return s.SetState(ctx, st) }
}

// plScript is a node's life: first start, assignments, trials,
// graduations, a rollback, and saves that prune history (MaxGenerations
// 2).
func plScript() []plStep {
	rolledBack := plState(3, 2, 2, 0).Reject(checkpoint.Failure{Hash: plHash(3), ID: plID(3), Reason: checkpoint.ReasonProbeFailed})
	return []plStep{
		{"initialize", func(ctx context.Context, s *checkpoint.FSStore) error { return s.Initialize(ctx) }, plModel{}},
		{"save c1", plSave(1), plModel{stored: []string{"c1"}}},
		{"assign c1", plSet(plState(1, 1, 0, 2)), plModel{assigned: "c1", active: "c1", triesLeft: 2, stored: []string{"c1"}}},
		{"graduate c1", plSet(plState(1, 1, 1, 0)), plModel{assigned: "c1", active: "c1", lkg: "c1", stored: []string{"c1"}}},
		{"save c2", plSave(2), plModel{assigned: "c1", active: "c1", lkg: "c1", stored: []string{"c1", "c2"}}},
		{"assign c2", plSet(plState(2, 2, 1, 2)), plModel{assigned: "c2", active: "c2", lkg: "c1", triesLeft: 2, stored: []string{"c1", "c2"}}},
		{"graduate c2", plSet(plState(2, 2, 2, 0)), plModel{assigned: "c2", active: "c2", lkg: "c2", stored: []string{"c1", "c2"}}},
		{"save c3, pruning c1", plSave(3), plModel{assigned: "c2", active: "c2", lkg: "c2", stored: []string{"c2", "c3"}}},
		{"assign c3", plSet(plState(3, 3, 2, 2)), plModel{assigned: "c3", active: "c3", lkg: "c2", triesLeft: 2, stored: []string{"c2", "c3"}}},
		{"roll back c3", plSet(rolledBack), plModel{assigned: "c3", active: "c2", lkg: "c2", rejected: 1, stored: []string{"c2", "c3"}}},
		{"save c4", plSave(4), plModel{assigned: "c3", active: "c2", lkg: "c2", rejected: 1, stored: []string{"c2", "c3", "c4"}}},
	}
}

func newStrictStore(t *testing.T, fsys *checkpointtest.StrictFS) *checkpoint.FSStore {
	t.Helper()
	s, err := checkpoint.NewFS(checkpoint.FSConfig{Dir: plDir, MaxGenerations: 2, FS: fsys})
	require.NoError(t, err)
	return s
}

// plObserve reopens the store after a crash and describes it.
func plObserve(t *testing.T, fsys *checkpointtest.StrictFS) plModel {
	t.Helper()
	ctx := context.Background()
	s := newStrictStore(t, fsys)
	require.NoError(t, s.Initialize(ctx), "reopen after power loss")
	defer s.Close()
	st, err := s.State(ctx)
	require.NoError(t, err, "state after power loss")
	m := plModel{assigned: st.Assigned, active: st.Active, lkg: st.LastKnownGood, triesLeft: st.TriesLeft, rejected: len(st.Rejected)}
	for i := 1; i <= 4; i++ {
		cp, err := s.Load(ctx, plID(i))
		switch {
		case errors.Is(err, checkpoint.ErrNotFound) && !errors.Is(err, checkpoint.ErrCorrupt):
		case err != nil:
			t.Fatalf("checkpoint %s after power loss: %v", plID(i), err)
		default:
			require.Equal(t, plPayload(i), cp.Payload, "payload of %s", plID(i))
			m.stored = append(m.stored, plID(i))
		}
	}
	for _, id := range []string{m.assigned, m.active, m.lkg} {
		require.True(t, id == "" || slices.Contains(m.stored, id), "the record names %s, which is not stored", id)
	}
	return m
}

// runScript runs the script on fsys until a step fails and returns how many
// steps were acknowledged.
func runScript(ctx context.Context, fsys *checkpointtest.StrictFS, script []plStep) int {
	fsys.MkdirAll("/var/lib/agent")
	s, _ := checkpoint.NewFS(checkpoint.FSConfig{Dir: plDir, MaxGenerations: 2, FS: fsys})
	for i, st := range script {
		if err := st.do(ctx, s); err != nil {
			return i
		}
	}
	return len(script)
}

func TestPowerLossAtEverySyncPoint(t *testing.T) {
	ctx := context.Background()
	script := plScript()
	total := checkpointtest.NewStrictFS()
	require.Equal(t, len(script), runScript(ctx, total, script), "the script runs without crashes")
	syncs := total.Syncs()
	require.Greater(t, syncs, 3*len(script))
	for k := 0; k <= syncs; k++ {
		fsys := checkpointtest.NewStrictFS()
		fsys.FreezeAfterSyncs(k)
		acked := runScript(ctx, fsys, script)
		// The power went where this run says: after exactly k sync
		// points, the script cut short unless k is its last.
		require.Equal(t, k, fsys.Syncs(), "sync points passed before the power loss at %d", k)
		require.Equal(t, k == syncs, acked == len(script), "script finished with the power lost at sync point %d of %d", k, syncs)
		fsys.Crash()
		got := plObserve(t, fsys)
		var ok []plModel
		if acked > 0 {
			ok = append(ok, script[acked-1].after)
		} else {
			ok = append(ok, plModel{}) // nothing acknowledged: an empty store
		}
		if acked < len(script) {
			ok = append(ok, script[acked].after)
		}
		if !slices.ContainsFunc(ok, func(m plModel) bool { return equalModel(m, got) }) {
			step := "none"
			if acked < len(script) {
				step = script[acked].name
			}
			t.Fatalf("power loss at sync point %d of %d, %d steps acknowledged, during %q:\n got  %+v\n want one of %+v", k, syncs, acked, step, got, ok)
		}
	}
	t.Logf("%d sync points, old-or-new after a power loss at each", syncs+1)
}

func equalModel(a, b plModel) bool {
	return a.assigned == b.assigned && a.active == b.active && a.lkg == b.lkg && a.triesLeft == b.triesLeft &&
		a.rejected == b.rejected && slices.Equal(a.stored, b.stored)
}

// TestPowerLossRecreatedCheckpointsDir: a store whose checkpoints directory
// was deleted recreates it durably, so a checkpoint saved into it survives
// a power loss before the next record write.
func TestPowerLossRecreatedCheckpointsDir(t *testing.T) {
	ctx := context.Background()
	fsys := checkpointtest.NewStrictFS()
	fsys.MkdirAll("/var/lib/agent")
	s := newStrictStore(t, fsys)
	require.NoError(t, s.Initialize(ctx))
	require.NoError(t, s.Close())
	require.NoError(t, fsys.Remove(plDir+"/checkpoints"))
	require.NoError(t, fsys.SyncDir(plDir))

	s = newStrictStore(t, fsys)
	require.NoError(t, s.Initialize(ctx))
	require.NoError(t, s.Save(ctx, checkpoint.Checkpoint{ID: "c1", Payload: plPayload(1)}))
	fsys.Crash()
	require.Equal(t, []string{"c1"}, plObserve(t, fsys).stored)
}

// TestFailedDirSyncIsRetried: when the directory fsync after a rename
// fails, memory follows the disk, the error is returned, and retrying the
// operation makes it durable.
func TestFailedDirSyncIsRetried(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		setup func(s *checkpoint.FSStore) error
		op    func(s *checkpoint.FSStore) error
		want  plModel
	}{
		{"save", func(*checkpoint.FSStore) error { return nil }, plSaveOn(ctx, 1), plModel{stored: []string{"c1"}}},
		{"set state", plSaveOn(ctx, 1), func(s *checkpoint.FSStore) error { return s.SetState(ctx, plState(1, 1, 0, 2)) },
			plModel{assigned: "c1", active: "c1", triesLeft: 2, stored: []string{"c1"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fsys := checkpointtest.NewStrictFS()
			fsys.MkdirAll("/var/lib/agent")
			s := newStrictStore(t, fsys)
			require.NoError(t, s.Initialize(ctx))
			require.NoError(t, tc.setup(s))
			eio := errors.New("input/output error")
			failed := false
			fsys.Fault(func(op checkpointtest.Op, name string) error {
				if op == checkpointtest.OpSyncDir && !failed {
					failed = true
					return eio
				}
				return nil
			})
			require.ErrorIs(t, tc.op(s), eio)
			// Memory agrees with what a fresh reader of the (not crashed)
			// disk sees.
			fsys.Fault(nil)
			st, err := s.State(ctx)
			require.NoError(t, err)
			require.Equal(t, tc.want.assigned, st.Assigned)
			_, err = s.Load(ctx, "c1")
			require.NoError(t, err)
			// The retry is durable.
			require.NoError(t, tc.op(s))
			fsys.Crash()
			require.True(t, equalModel(tc.want, plObserve(t, fsys)), "after retry and power loss: %+v", plObserve(t, fsys))
		})
	}
}
