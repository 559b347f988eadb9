package checkpoint_test

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if os.Getenv(crashChildEnv) != "" {
		os.Exit(crashChild())
	}
	if os.Getenv(ctrlChildEnv) != "" {
		os.Exit(ctrlChild())
	}
	if os.Getenv(lockChildEnv) != "" {
		os.Exit(lockChild())
	}
	dir, err := os.MkdirTemp("", "checkpoint-children-")
	if err == nil {
		childDir = dir
	}
	code := m.Run()
	if childDir != "" {
		_ = os.RemoveAll(childDir)
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: errors on successful test run: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}
