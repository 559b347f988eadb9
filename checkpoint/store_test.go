package checkpoint_test

import (
	"testing"

	"github.com/reconkit/reconkit/checkpoint"
	"github.com/reconkit/reconkit/checkpoint/checkpointtest"
	"github.com/stretchr/testify/require"
)

func TestMemStoreConformance(t *testing.T) {
	checkpointtest.Run(t, func(t *testing.T) checkpoint.LKGStore { return &checkpoint.MemStore{} })
}

func TestFSStoreConformance(t *testing.T) {
	checkpointtest.Run(t, func(t *testing.T) checkpoint.LKGStore {
		s, err := checkpoint.NewFS(checkpoint.FSConfig{Dir: t.TempDir() + "/store", MaxGenerations: 4})
		require.NoError(t, err)
		return s
	})
}
