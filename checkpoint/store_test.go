package checkpoint_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reconkit/reconkit/checkpoint"
	"github.com/reconkit/reconkit/checkpoint/checkpointtest"
)

func TestMemStoreConformance(t *testing.T) {
	checkpointtest.Run(t, func(t *testing.T) checkpoint.LKGStore { return &checkpoint.MemStore{} })
}

func TestFSStoreConformance(t *testing.T) {
	checkpointtest.Run(t, func(t *testing.T) checkpoint.LKGStore {
		s, err := checkpoint.NewFS(checkpoint.FSConfig{Dir: t.TempDir() + "/store", MaxGenerations: 4})
		require.NoError(t, err)
		t.Cleanup(func() { _ = s.Close() })
		return s
	})
}

func TestFSStoreOnStrictFSConformance(t *testing.T) {
	checkpointtest.Run(t, func(t *testing.T) checkpoint.LKGStore {
		fsys := checkpointtest.NewStrictFS()
		fsys.MkdirAll("/var/lib/agent")
		s, err := checkpoint.NewFS(checkpoint.FSConfig{Dir: "/var/lib/agent/store", MaxGenerations: 4, FS: fsys})
		require.NoError(t, err)
		return s
	})
}
