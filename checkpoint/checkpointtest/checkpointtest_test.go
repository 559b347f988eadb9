package checkpointtest_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/reconkit/reconkit/checkpoint"
	"github.com/reconkit/reconkit/checkpoint/checkpointtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestRunMemStore(t *testing.T) {
	checkpointtest.Run(t, func(t *testing.T) checkpoint.LKGStore { return &checkpoint.MemStore{} })
}
