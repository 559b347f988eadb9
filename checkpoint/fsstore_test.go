package checkpoint_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconkit/reconkit/checkpoint"
)

// newFS opens an FSStore on dir, closed (unlocked) when the test ends.
func newFS(t *testing.T, dir string, maxGens int) *checkpoint.FSStore {
	t.Helper()
	s, err := checkpoint.NewFS(checkpoint.FSConfig{Dir: dir, MaxGenerations: maxGens})
	require.NoError(t, err)
	require.NoError(t, s.Initialize(context.Background()))
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// reopen closes s, as a process exit does, and opens its directory again.
func reopen(t *testing.T, s *checkpoint.FSStore, maxGens int) *checkpoint.FSStore {
	t.Helper()
	require.NoError(t, s.Close())
	return newFS(t, s.Dir(), maxGens)
}

// setRefs records assigned (active) and last-known-good checkpoints,
// which must be saved.
func setRefs(t testing.TB, s checkpoint.LKGStore, assigned, lkg string) {
	t.Helper()
	ctx := context.Background()
	st, err := s.State(ctx)
	if !errors.Is(err, checkpoint.ErrCorrupt) { // a lost record is replaced
		require.NoError(t, err)
	}
	hash := func(id string) string {
		if id == "" {
			return ""
		}
		cp, err := s.Load(ctx, id)
		require.NoError(t, err)
		return cp.Hash
	}
	st.Assigned, st.AssignedHash, st.Active = assigned, hash(assigned), assigned
	st.LastKnownGood, st.LastKnownGoodHash = lkg, hash(lkg)
	require.NoError(t, s.SetState(ctx, st))
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
	_, err = s.State(context.Background())
	require.ErrorIs(t, err, checkpoint.ErrNotInitialized)
	require.ErrorIs(t, s.Save(context.Background(), checkpoint.Checkpoint{ID: "a"}), checkpoint.ErrNotInitialized)
}

func TestFSPersistsAcrossOpen(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "store")
	s := newFS(t, dir, 0)
	saveN(t, s, "a", "b")
	setRefs(t, s, "b", "a")
	st, err := s.State(ctx)
	require.NoError(t, err)
	st.AssignedAt = time.Unix(100, 7)
	require.NoError(t, s.SetState(ctx, st))

	s2 := reopen(t, s, 0)
	requireCurLKG(t, s2, "b", "a")
	st, err = s2.State(ctx)
	require.NoError(t, err)
	require.True(t, st.AssignedAt.Equal(time.Unix(100, 7)), "assigned at %v", st.AssignedAt)
}

func requireCurLKG(t *testing.T, s checkpoint.LKGStore, assigned, lkg string) {
	t.Helper()
	st, err := s.State(context.Background())
	require.NoError(t, err)
	require.Equal(t, assigned, st.Assigned, "assigned")
	require.Equal(t, lkg, st.LastKnownGood, "last-known-good")
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
	for _, f := range []string{filepath.Join(dir, "state-a"), filepath.Join(dir, "state-b"), checkpointFile(t, dir, "a")} {
		fi, err := os.Stat(f)
		require.NoError(t, err)
		require.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), f)
	}
	// Leftovers of an interrupted write disappear at the next Initialize.
	tmp1 := filepath.Join(dir, ".tmp-123")
	tmp2 := filepath.Join(dir, "checkpoints", ".tmp-456")
	require.NoError(t, os.WriteFile(tmp1, []byte("half a meta"), 0o600))
	require.NoError(t, os.WriteFile(tmp2, []byte("half a checkpoint"), 0o600))
	reopen(t, s, 0)
	require.NoFileExists(t, tmp1)
	require.NoFileExists(t, tmp2)
}

func TestFSBoundedHistory(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "store")
	s := newFS(t, dir, 3)
	saveN(t, s, "g1", "g2")
	setRefs(t, s, "g2", "g1")
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
	s2 := reopen(t, s, 3)
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
		}, checkpoint.ErrCorrupt, "assigned checkpoint's file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "store")
			s := newFS(t, dir, 0)
			saveN(t, s, "a")
			setRefs(t, s, "a", "")
			tc.damage(t, dir)
			_, err := s.Load(ctx, "a")
			require.ErrorIs(t, err, tc.wantErr)
			require.ErrorContains(t, err, tc.wantMsg)
			_, err = reopen(t, s, 0).Load(ctx, "a")
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
	setRefs(t, s, "b", "a")
	require.NoError(t, os.RemoveAll(filepath.Join(dir, "checkpoints")))

	s2 := reopen(t, s, 0)
	requireCurLKG(t, s2, "b", "a")
	_, err := s2.Load(ctx, "b")
	require.ErrorIs(t, err, checkpoint.ErrCorrupt)
	require.ErrorContains(t, err, "assigned checkpoint has no file")
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
	require.Error(t, s.SetState(ctx, checkpoint.State{}))
	require.Error(t, s.Save(ctx, checkpoint.Checkpoint{ID: "b"}))

	// A store whose parent directory is gone cannot be initialized.
	s3, err := checkpoint.NewFS(checkpoint.FSConfig{Dir: filepath.Join(dir, "deeper", "store")})
	require.NoError(t, err)
	require.ErrorContains(t, s3.Initialize(ctx), "no such file or directory")
}

// TestFSDamagedState damages the state record in every way, one copy at a
// time and both, and checks which configuration the store then names and
// why.
func TestFSDamagedState(t *testing.T) {
	ctx := context.Background()
	damages := []struct {
		name   string
		damage func(t *testing.T, path string)
	}{
		{"bit flip", func(t *testing.T, path string) { flipLastByte(t, path) }},
		{"bit flip in the body", func(t *testing.T, path string) {
			data, err := os.ReadFile(path)
			require.NoError(t, err)
			i := strings.Index(string(data), `"lastKnownGood"`)
			data[i+3] ^= 0x01
			require.NoError(t, os.WriteFile(path, data, 0o600))
		}},
		{"truncated", func(t *testing.T, path string) {
			data, err := os.ReadFile(path)
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(path, data[:len(data)/2], 0o600))
		}},
		{"zero length", func(t *testing.T, path string) { require.NoError(t, os.WriteFile(path, nil, 0o600)) }},
		{"deleted", func(t *testing.T, path string) { require.NoError(t, os.Remove(path)) }},
		{"replaced by a directory", func(t *testing.T, path string) {
			require.NoError(t, os.Remove(path))
			require.NoError(t, os.Mkdir(path, 0o700))
			require.NoError(t, os.WriteFile(filepath.Join(path, "x"), []byte("x"), 0o600))
		}},
	}
	for _, d := range damages {
		for _, slot := range []string{"state-a", "state-b"} {
			t.Run(d.name+"/"+slot, func(t *testing.T) {
				dir := filepath.Join(t.TempDir(), "store")
				s := newFS(t, dir, 0)
				saveN(t, s, "a", "b")
				setRefs(t, s, "b", "a")
				d.damage(t, filepath.Join(dir, slot))

				// The intact copy names both; the damaged one is rewritten.
				s2 := reopen(t, s, 0)
				requireCurLKG(t, s2, "b", "a")
				for _, sl := range []string{"state-a", "state-b"} {
					fi, err := os.Stat(filepath.Join(dir, sl))
					require.NoError(t, err, sl)
					require.True(t, fi.Mode().IsRegular(), "%s repaired", sl)
				}
				// And it survives losing the other copy next.
				require.NoError(t, os.Remove(filepath.Join(dir, otherSlot(slot))))
				requireCurLKG(t, reopen(t, s2, 0), "b", "a")
			})
		}
		t.Run(d.name+"/both", func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "store")
			s := newFS(t, dir, 0)
			saveN(t, s, "a", "b")
			setRefs(t, s, "b", "a")
			d.damage(t, filepath.Join(dir, "state-a"))
			d.damage(t, filepath.Join(dir, "state-b"))
			s2 := reopen(t, s, 0)
			_, err := s2.State(ctx)
			require.ErrorIs(t, err, checkpoint.ErrCorrupt)
			require.ErrorContains(t, err, "both copies unusable")
			// Checkpoints are still readable, and a new record repairs
			// the store, keeping damaged files aside.
			_, err = s2.Load(ctx, "b")
			require.NoError(t, err)
			setRefs(t, s2, "b", "")
			requireCurLKG(t, reopen(t, s2, 0), "b", "")
			if d.name != "deleted" {
				_, err := os.Stat(filepath.Join(dir, "state-a.corrupt"))
				require.NoError(t, err, "damaged copy kept aside")
			}
		})
	}
}

func otherSlot(slot string) string {
	if slot == "state-a" {
		return "state-b"
	}
	return "state-a"
}

// TestFSNewerCopyWins: of two intact copies the one with the higher
// generation names the state, as after a crash between writing them.
func TestFSNewerCopyWins(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "store")
	s := newFS(t, dir, 0)
	saveN(t, s, "a", "b")
	setRefs(t, s, "a", "")
	old, err := os.ReadFile(filepath.Join(dir, "state-a"))
	require.NoError(t, err)
	setRefs(t, s, "b", "a")
	for _, slot := range []string{"state-a", "state-b"} {
		// The other copy holds the newer record.
		require.NoError(t, os.WriteFile(filepath.Join(dir, slot), old, 0o600))
		s = reopen(t, s, 0)
		requireCurLKG(t, s, "b", "a")
	}
}

func TestFSLocked(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "store")
	s := newFS(t, dir, 0)
	saveN(t, s, "a")
	other, err := checkpoint.NewFS(checkpoint.FSConfig{Dir: dir})
	require.NoError(t, err)
	// A temporary file of the owner's write in progress.
	tmp := filepath.Join(dir, "checkpoints", ".tmp-inflight")
	require.NoError(t, os.WriteFile(tmp, []byte("half"), 0o600))
	err = other.Initialize(ctx)
	require.ErrorIs(t, err, checkpoint.ErrLocked)
	require.ErrorContains(t, err, dir)
	require.FileExists(t, tmp, "a second user removed the owner's temporary file")
	require.ErrorIs(t, other.Save(ctx, checkpoint.Checkpoint{ID: "b"}), checkpoint.ErrNotInitialized)
	// Once the owner is gone its leftovers are provably stale.
	require.NoError(t, s.Close())
	require.NoError(t, other.Initialize(ctx))
	defer other.Close()
	require.NoFileExists(t, tmp)
	_, err = other.Load(ctx, "a")
	require.NoError(t, err)
}

// TestFSLockedAcrossProcesses: the lock holds against another process,
// and is released when the holder dies.
func TestFSLockedAcrossProcesses(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "store")
	newFS(t, dir, 0).Close()
	child := startLockHolder(t, dir)
	s, err := checkpoint.NewFS(checkpoint.FSConfig{Dir: dir})
	require.NoError(t, err)
	require.ErrorIs(t, s.Initialize(ctx), checkpoint.ErrLocked)
	require.NoError(t, child.Process.Kill())
	_ = child.Wait()
	require.NoError(t, s.Initialize(ctx))
	require.NoError(t, s.Close())
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
	s2 := reopen(t, s, 0)
	_, err := s2.Load(ctx, "a")
	require.NoError(t, err)
}

// TestFSUpgradesVersion1: a store written by the version-1 format (one
// "meta" record naming current and last-known-good) keeps both.
func TestFSUpgradesVersion1(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "store")
	s := newFS(t, dir, 0)
	saveN(t, s, "a", "b")
	require.NoError(t, s.Close())
	require.NoError(t, os.Remove(filepath.Join(dir, "state-a")))
	require.NoError(t, os.Remove(filepath.Join(dir, "state-b")))
	body := `{"current":"b","lastKnownGood":"a","currentSetAt":1700000000000000000}`
	sum := sha256.Sum256([]byte(body))
	meta := "reconkit-checkpoint-meta v1\n" + body + "\nsha256:" + hex.EncodeToString(sum[:]) + "\n"
	require.NoError(t, os.WriteFile(filepath.Join(dir, "meta"), []byte(meta), 0o600))

	s2 := newFS(t, dir, 0)
	st, err := s2.State(ctx)
	require.NoError(t, err)
	require.Equal(t, "b", st.Assigned)
	require.Equal(t, "b", st.Active)
	require.Equal(t, "a", st.LastKnownGood)
	require.Equal(t, checkpoint.HashPayload([]byte("payload of b")), st.AssignedHash)
	require.Equal(t, checkpoint.HashPayload([]byte("payload of a")), st.LastKnownGoodHash)
	require.Equal(t, 1, st.TriesLeft, "the trial gets one more start")
	requireCurLKG(t, reopen(t, s2, 0), "b", "a")
}
