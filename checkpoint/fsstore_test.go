package checkpoint_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconkit/reconkit/checkpoint"
)

func newFS(t *testing.T, dir string, maxGens int) *checkpoint.FSStore {
	t.Helper()
	s, err := checkpoint.NewFS(checkpoint.FSConfig{Dir: dir, MaxGenerations: maxGens})
	require.NoError(t, err)
	require.NoError(t, s.Initialize(context.Background()))
	return s
}

func saveN(t *testing.T, s checkpoint.LKGStore, ids ...string) {
	t.Helper()
	for _, id := range ids {
		require.NoError(t, s.Save(context.Background(), checkpoint.Checkpoint{ID: id, Payload: []byte("payload of " + id)}))
	}
}

// checkpointFile returns the path of the file holding id.
func checkpointFile(t *testing.T, dir, id string) string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "checkpoints", "*-"+id))
	require.NoError(t, err)
	require.Len(t, m, 1, "files for %s", id)
	return m[0]
}

func TestNewFSRejectsBadConfig(t *testing.T) {
	_, err := checkpoint.NewFS(checkpoint.FSConfig{})
	require.ErrorContains(t, err, "Dir is required")
	_, err = checkpoint.NewFS(checkpoint.FSConfig{Dir: t.TempDir(), MaxGenerations: -1})
	require.ErrorContains(t, err, "MaxGenerations")
}

func TestFSNotInitialized(t *testing.T) {
	s, err := checkpoint.NewFS(checkpoint.FSConfig{Dir: t.TempDir()})
	require.NoError(t, err)
	_, err = s.Current(context.Background())
	require.ErrorIs(t, err, checkpoint.ErrNotInitialized)
	require.ErrorIs(t, s.Save(context.Background(), checkpoint.Checkpoint{ID: "a"}), checkpoint.ErrNotInitialized)
}

func TestFSPersistsAcrossOpen(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "store")
	s := newFS(t, dir, 0)
	saveN(t, s, "a", "b")
	require.NoError(t, s.SetCurrent(ctx, "b", time.Unix(100, 7)))
	require.NoError(t, s.SetLastKnownGood(ctx, "a"))

	s2 := newFS(t, dir, 0)
	requireCurLKG(t, s2, "b", "a")
	at, err := s2.CurrentSetAt(ctx)
	require.NoError(t, err)
	require.True(t, at.Equal(time.Unix(100, 7)), "trial start %v", at)
}

func requireCurLKG(t *testing.T, s checkpoint.LKGStore, cur, lkg string) {
	t.Helper()
	got, err := s.Current(context.Background())
	require.NoError(t, err)
	require.Equal(t, cur, got)
	got, err = s.LastKnownGood(context.Background())
	require.NoError(t, err)
	require.Equal(t, lkg, got)
}

func TestFSModesAndTempCleanup(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	s := newFS(t, dir, 0)
	saveN(t, s, "a")
	for _, d := range []string{dir, filepath.Join(dir, "checkpoints")} {
		fi, err := os.Stat(d)
		require.NoError(t, err)
		require.Equal(t, os.FileMode(0o700), fi.Mode().Perm(), d)
	}
	for _, f := range []string{filepath.Join(dir, "meta"), checkpointFile(t, dir, "a")} {
		fi, err := os.Stat(f)
		require.NoError(t, err)
		require.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), f)
	}
	// Leftovers of an interrupted write disappear at the next Initialize.
	tmp1 := filepath.Join(dir, ".tmp-123")
	tmp2 := filepath.Join(dir, "checkpoints", ".tmp-456")
	require.NoError(t, os.WriteFile(tmp1, []byte("half a meta"), 0o600))
	require.NoError(t, os.WriteFile(tmp2, []byte("half a checkpoint"), 0o600))
	newFS(t, dir, 0)
	require.NoFileExists(t, tmp1)
	require.NoFileExists(t, tmp2)
}

func TestFSBoundedHistory(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "store")
	s := newFS(t, dir, 3)
	saveN(t, s, "g1", "g2")
	require.NoError(t, s.SetLastKnownGood(ctx, "g1"))
	require.NoError(t, s.SetCurrent(ctx, "g2", time.Unix(1, 0)))
	saveN(t, s, "g3", "g4", "g5", "g6")
	// g1 (LKG) and g2 (current) are never pruned, the newest are kept.
	for _, id := range []string{"g1", "g2", "g6"} {
		_, err := s.Load(ctx, id)
		require.NoError(t, err, id)
	}
	for _, id := range []string{"g3", "g4", "g5"} {
		_, err := s.Load(ctx, id)
		require.ErrorIs(t, err, checkpoint.ErrNotFound, id)
	}
	entries, err := os.ReadDir(filepath.Join(dir, "checkpoints"))
	require.NoError(t, err)
	require.Len(t, entries, 3)
	// The index survives reopening, and generations continue upwards.
	s2 := newFS(t, dir, 3)
	saveN(t, s2, "g7")
	_, err = s2.Load(ctx, "g6")
	require.ErrorIs(t, err, checkpoint.ErrNotFound, "g6 is now the oldest unprotected")
	_, err = s2.Load(ctx, "g7")
	require.NoError(t, err)
}

func TestFSCorruption(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name    string
		damage  func(t *testing.T, dir string)
		wantErr error
		wantMsg string
	}{
		{"truncated", func(t *testing.T, dir string) {
			f := checkpointFile(t, dir, "a")
			data, err := os.ReadFile(f)
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(f, data[:len(data)-3], 0o600))
		}, checkpoint.ErrCorrupt, "truncated"},
		{"empty file", func(t *testing.T, dir string) {
			require.NoError(t, os.WriteFile(checkpointFile(t, dir, "a"), nil, 0o600))
		}, checkpoint.ErrCorrupt, "unknown format"},
		{"payload bit flip", func(t *testing.T, dir string) {
			flipLastByte(t, checkpointFile(t, dir, "a"))
		}, checkpoint.ErrCorrupt, "does not match recorded"},
		{"header bit flip", func(t *testing.T, dir string) {
			f := checkpointFile(t, dir, "a")
			data, err := os.ReadFile(f)
			require.NoError(t, err)
			i := strings.Index(string(data), `"size"`)
			data[i+2] ^= 0x01
			require.NoError(t, os.WriteFile(f, data, 0o600))
		}, checkpoint.ErrCorrupt, "header checksum mismatch"},
		{"missing file", func(t *testing.T, dir string) {
			require.NoError(t, os.Remove(checkpointFile(t, dir, "a")))
		}, checkpoint.ErrCorrupt, "current checkpoint's file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "store")
			s := newFS(t, dir, 0)
			saveN(t, s, "a")
			require.NoError(t, s.SetCurrent(ctx, "a", time.Unix(1, 0)))
			tc.damage(t, dir)
			_, err := s.Load(ctx, "a")
			require.ErrorIs(t, err, tc.wantErr)
			require.ErrorContains(t, err, tc.wantMsg)
			_, err = newFS(t, dir, 0).Load(ctx, "a")
			require.ErrorIs(t, err, tc.wantErr, "after reopening")
		})
	}
}

func flipLastByte(t *testing.T, f string) {
	t.Helper()
	data, err := os.ReadFile(f)
	require.NoError(t, err)
	data[len(data)-1] ^= 0x10
	require.NoError(t, os.WriteFile(f, data, 0o600))
}

func TestFSMissingCheckpointsDir(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "store")
	s := newFS(t, dir, 0)
	saveN(t, s, "a", "b")
	require.NoError(t, s.SetCurrent(ctx, "b", time.Unix(1, 0)))
	require.NoError(t, s.SetLastKnownGood(ctx, "a"))
	require.NoError(t, os.RemoveAll(filepath.Join(dir, "checkpoints")))

	s2 := newFS(t, dir, 0)
	requireCurLKG(t, s2, "b", "a")
	_, err := s2.Load(ctx, "b")
	require.ErrorIs(t, err, checkpoint.ErrCorrupt)
	require.ErrorContains(t, err, "current checkpoint has no file")
	_, err = s2.Load(ctx, "a")
	require.ErrorIs(t, err, checkpoint.ErrCorrupt)
	require.ErrorContains(t, err, "last-known-good checkpoint has no file")
}

func TestFSMissingStoreDir(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "store")
	s := newFS(t, dir, 0)
	saveN(t, s, "a")
	require.NoError(t, os.RemoveAll(dir))
	_, err := s.Load(ctx, "a")
	require.ErrorIs(t, err, checkpoint.ErrNotInitialized)
	require.ErrorContains(t, err, "has disappeared")
	require.Error(t, s.SetCurrent(ctx, "a", time.Unix(1, 0)))
	require.Error(t, s.Save(ctx, checkpoint.Checkpoint{ID: "b"}))

	// A store whose parent directory is gone cannot be initialized.
	s3, err := checkpoint.NewFS(checkpoint.FSConfig{Dir: filepath.Join(dir, "deeper", "store")})
	require.NoError(t, err)
	require.ErrorContains(t, s3.Initialize(ctx), "no such file or directory")
}

func TestFSDamagedMeta(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, meta string)
		msg    string
	}{
		{"bit flip", func(t *testing.T, meta string) { flipLastByte(t, meta) }, "checksum"},
		{"truncated", func(t *testing.T, meta string) {
			data, err := os.ReadFile(meta)
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(meta, data[:len(data)/2], 0o600))
		}, "metadata"},
		{"missing", func(t *testing.T, meta string) { require.NoError(t, os.Remove(meta)) }, "missing while 2 checkpoints exist"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "store")
			s := newFS(t, dir, 0)
			saveN(t, s, "a", "b")
			require.NoError(t, s.SetCurrent(ctx, "a", time.Unix(1, 0)))
			tc.damage(t, filepath.Join(dir, "meta"))
			s2 := newFS(t, dir, 0)
			_, err := s2.Current(ctx)
			require.ErrorIs(t, err, checkpoint.ErrCorrupt)
			require.ErrorContains(t, err, tc.msg)
			_, err = s2.LastKnownGood(ctx)
			require.ErrorIs(t, err, checkpoint.ErrCorrupt)
			// Checkpoints are still readable, and a new assignment repairs
			// the record while keeping the damaged one aside.
			_, err = s2.Load(ctx, "b")
			require.NoError(t, err)
			require.NoError(t, s2.SetCurrent(ctx, "b", time.Unix(2, 0)))
			requireCurLKG(t, newFS(t, dir, 0), "b", "")
			if tc.name != "missing" {
				require.FileExists(t, filepath.Join(dir, "meta.corrupt"))
			}
		})
	}
}

func TestFSSaveReplacesDamagedCheckpoint(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "store")
	s := newFS(t, dir, 0)
	saveN(t, s, "a")
	flipLastByte(t, checkpointFile(t, dir, "a"))
	saveN(t, s, "a")
	cp, err := s.Load(ctx, "a")
	require.NoError(t, err)
	require.Equal(t, "payload of a", string(cp.Payload))
	checkpointFile(t, dir, "a") // exactly one file left
}

func TestFSIgnoresStrangers(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "store")
	s := newFS(t, dir, 0)
	saveN(t, s, "a")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "checkpoints", "README"), []byte("x"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "checkpoints", fmt.Sprintf("%016x-..", 9)), []byte("x"), 0o600))
	s2 := newFS(t, dir, 0)
	_, err := s2.Load(ctx, "a")
	require.NoError(t, err)
}
