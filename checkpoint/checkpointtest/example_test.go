package checkpointtest_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/reconkit/reconkit/checkpoint"
	"github.com/reconkit/reconkit/checkpoint/checkpointtest"
)

// A store implementation proves itself by running the suite from its own
// test, with a fresh store per subtest:
//
//	func TestConformance(t *testing.T) {
//		checkpointtest.Run(t, func(t *testing.T) checkpoint.LKGStore {
//			return &checkpoint.MemStore{}
//		})
//	}
//
// Outside a test, Check runs the same cases and returns what failed.
func ExampleRun() {
	var _ func(*testing.T, func(*testing.T) checkpoint.LKGStore) = checkpointtest.Run
	err := checkpointtest.Check(func() (checkpoint.LKGStore, error) {
		return &checkpoint.MemStore{}, nil
	})
	fmt.Println("conformance failures:", err)
	// Output:
	// conformance failures: <nil>
}

// Check reports every case a broken store fails.
func ExampleCheck() {
	err := checkpointtest.Check(func() (checkpoint.LKGStore, error) {
		return forgetful{&checkpoint.MemStore{}}, nil
	})
	fmt.Println(err != nil)
	// Output:
	// true
}

// forgetful loses every SetState.
type forgetful struct{ *checkpoint.MemStore }

func (forgetful) SetState(ctx context.Context, st checkpoint.State) error { return ctx.Err() }
