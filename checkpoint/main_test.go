package checkpoint_test

import (
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
	goleak.VerifyTestMain(m)
}
