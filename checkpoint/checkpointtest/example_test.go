package checkpointtest_test

import (
	"testing"

	"github.com/reconkit/reconkit/checkpoint"
	"github.com/reconkit/reconkit/checkpoint/checkpointtest"
)

// A store implementation proves itself by running the suite from its own
// test, with a fresh store per subtest.
func ExampleRun() {
	_ = func(t *testing.T) { // func TestConformance(t *testing.T)
		checkpointtest.Run(t, func(t *testing.T) checkpoint.LKGStore {
			return &checkpoint.MemStore{}
		})
	}
}
