package checkpoint_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reconkit/reconkit/checkpoint"
)

// Guarantees of FSStore not covered elsewhere.

// TestFSNoPruningWithoutStateRecord: with both copies of the state record
// lost, nothing is known to be unreferenced, so a Save beyond
// MaxGenerations deletes nothing; the last-known-good checkpoint's file
// survives for whoever repairs the record.
func TestFSNoPruningWithoutStateRecord(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "store")
	s := newFS(t, dir, 2)
	saveN(t, s, "lkg", "cur")
	setRefs(t, s, "cur", "lkg")
	for _, slot := range []string{"state-a", "state-b"} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, slot), []byte("garbage"), 0o600))
	}
	s2 := reopen(t, s, 2)
	_, err := s2.State(ctx)
	require.ErrorIs(t, err, checkpoint.ErrCorrupt)
	saveN(t, s2, "n1", "n2")
	for _, id := range []string{"lkg", "cur", "n1", "n2"} {
		_, err := s2.Load(ctx, id)
		require.NoError(t, err, id)
	}
}

// TestFSFileOfAnotherCheckpoint: a checkpoint file whose content is
// another checkpoint's (a file copied or renamed by hand) is reported as
// corruption, never returned as the checkpoint its name says.
func TestFSFileOfAnotherCheckpoint(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "store")
	s := newFS(t, dir, 0)
	saveN(t, s, "a", "b")
	data, err := os.ReadFile(checkpointFile(t, dir, "a"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(checkpointFile(t, dir, "b"), data, 0o600))
	_, err = s.Load(ctx, "b")
	require.ErrorIs(t, err, checkpoint.ErrCorrupt)
	require.ErrorContains(t, err, `file holds "a"`)
}
