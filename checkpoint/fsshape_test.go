package checkpoint_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/reconkit/reconkit/checkpoint"
)

// lkgStore makes a store in a fresh directory with "a" (level=4) as
// last-known-good and "b" (level=6) assigned and last-known-good too, and
// closes it, as a process exit does.
func lkgStore(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "store")
	s, err := checkpoint.NewFS(checkpoint.FSConfig{Dir: dir})
	require.NoError(t, err)
	require.NoError(t, s.Initialize(ctx))
	require.NoError(t, s.Save(ctx, checkpoint.Checkpoint{ID: "a", Payload: []byte("level=4")}))
	setRefs(t, s, "a", "a")
	require.NoError(t, s.Close())
	return dir
}

func bootstrapOn(t *testing.T, dir string) checkpoint.Status[agentConfig] {
	t.Helper()
	store, err := checkpoint.NewFS(checkpoint.FSConfig{Dir: dir})
	require.NoError(t, err)
	t.Cleanup(func() { _ = store.Close() })
	h := newHarness(t, store, clocktesting.NewFakeClock(t0))
	st, err := h.ctrl.Bootstrap(context.Background())
	require.NoError(t, err)
	return st
}

// TestFSTempEntriesOfAnyShape: whatever the shape of a .tmp-* entry (a
// directory holding files and directories, a symbolic link), Initialize
// removes it, never following a link, and the last-known-good
// configuration runs.
func TestFSTempEntriesOfAnyShape(t *testing.T) {
	dir := lkgStore(t)
	outside := filepath.Join(t.TempDir(), "precious")
	require.NoError(t, os.WriteFile(outside, []byte("keep"), 0o600))
	entries := []string{
		filepath.Join(dir, ".tmp-dir"),
		filepath.Join(dir, "checkpoints", ".tmp-deep"),
		filepath.Join(dir, ".tmp-link"),
		filepath.Join(dir, "checkpoints", ".tmp-dirlink"),
	}
	require.NoError(t, os.MkdirAll(filepath.Join(entries[0], "sub"), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(entries[0], "f"), []byte("x"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(entries[0], "sub", "g"), []byte("x"), 0o600))
	require.NoError(t, os.MkdirAll(filepath.Join(entries[1], "a", "b"), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(entries[1], "a", "b", "c"), []byte("x"), 0o600))
	require.NoError(t, os.Symlink(outside, entries[2]))
	require.NoError(t, os.Symlink(filepath.Dir(outside), entries[3]))

	st := bootstrapOn(t, dir)
	require.Equal(t, checkpoint.PhaseLastKnownGood, st.Phase, "%+v", st)
	require.Equal(t, "a", st.ID)
	require.Equal(t, 4, st.Config.Level)
	for _, e := range entries {
		_, err := os.Lstat(e)
		require.ErrorIs(t, err, os.ErrNotExist, e)
	}
	data, err := os.ReadFile(outside)
	require.NoError(t, err, "a link is removed, not followed")
	require.Equal(t, "keep", string(data))
}

// TestFSCheckpointsDirReplacedByFile: a file where the checkpoints
// directory was is damage the store cannot have made. Initialize keeps the
// file aside and makes a new directory; the state record still opens, the
// checkpoints it names report the loss as corruption, and a new assignment
// is saved and runs.
func TestFSCheckpointsDirReplacedByFile(t *testing.T) {
	ctx := context.Background()
	dir := lkgStore(t)
	ck := filepath.Join(dir, "checkpoints")
	require.NoError(t, os.RemoveAll(ck))
	require.NoError(t, os.WriteFile(ck, []byte("not a directory"), 0o600))

	s, err := checkpoint.NewFS(checkpoint.FSConfig{Dir: dir})
	require.NoError(t, err)
	require.NoError(t, s.Initialize(ctx))
	requireCurLKG(t, s, "a", "a")
	_, err = s.Load(ctx, "a")
	require.ErrorIs(t, err, checkpoint.ErrCorrupt)
	require.ErrorIs(t, err, checkpoint.ErrNotFound)
	require.ErrorContains(t, err, "is a regular file, not a directory")
	require.ErrorContains(t, err, "checkpoints.corrupt")
	kept, err := os.ReadFile(ck + ".corrupt")
	require.NoError(t, err)
	require.Equal(t, "not a directory", string(kept))
	fi, err := os.Stat(ck)
	require.NoError(t, err)
	require.True(t, fi.IsDir())
	require.Equal(t, os.FileMode(0o700), fi.Mode().Perm())
	require.NoError(t, s.Close())

	// The Controller reports the loss and runs the local configuration;
	// a new assignment is saved and tried.
	store, err := checkpoint.NewFS(checkpoint.FSConfig{Dir: dir})
	require.NoError(t, err)
	t.Cleanup(func() { _ = store.Close() })
	h := newHarness(t, store, clocktesting.NewFakeClock(t0))
	st, err := h.ctrl.Bootstrap(ctx)
	require.NoError(t, err)
	require.Equal(t, checkpoint.PhaseRolledBack, st.Phase)
	require.Equal(t, checkpoint.ConditionFalse, st.Condition.Status)
	require.Equal(t, checkpoint.ReasonLoadFailed, st.Condition.Reason)
	st, err = h.ctrl.Assign(ctx, []byte("level=8"), src("new", "1"))
	require.NoError(t, err)
	require.Equal(t, checkpoint.PhaseTrial, st.Phase)
	require.Equal(t, 8, st.Config.Level)
}

// TestFSStrangersInPlaceOfDirectories: a lock that is not a file, or a
// store directory that is a file, cannot be repaired safely; Initialize
// fails with an error wrapping ErrCorrupt that names the entry, and the
// Controller reports it and runs the local configuration.
func TestFSStrangersInPlaceOfDirectories(t *testing.T) {
	ctx := context.Background()
	t.Run("lock is a directory", func(t *testing.T) {
		dir := lkgStore(t)
		lock := filepath.Join(dir, "lock")
		require.NoError(t, os.Remove(lock))
		require.NoError(t, os.MkdirAll(filepath.Join(lock, "x"), 0o700))
		s, err := checkpoint.NewFS(checkpoint.FSConfig{Dir: dir})
		require.NoError(t, err)
		err = s.Initialize(ctx)
		require.ErrorIs(t, err, checkpoint.ErrCorrupt)
		require.ErrorContains(t, err, "lock is a directory, not a file")
		st := bootstrapOn(t, dir)
		require.Equal(t, checkpoint.ReasonStoreUnavailable, st.Condition.Reason)
		require.Contains(t, st.Condition.Message, "lock is a directory")
	})
	t.Run("store directory is a file", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "store")
		require.NoError(t, os.WriteFile(dir, []byte("x"), 0o600))
		s, err := checkpoint.NewFS(checkpoint.FSConfig{Dir: dir})
		require.NoError(t, err)
		err = s.Initialize(ctx)
		require.ErrorIs(t, err, checkpoint.ErrCorrupt)
		require.ErrorContains(t, err, "is not a directory")
	})
}
