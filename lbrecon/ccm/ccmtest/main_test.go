package ccmtest

import (
	"os"
	"testing"
)

// noMainEnv makes this test binary's TestMain skip Main, as a user's that
// forgot it would (TestStartWithoutMainSaysSo).
const noMainEnv = "RECONKIT_CCMTEST_TEST_NO_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(noMainEnv) != "" {
		m.Run()
		return
	}
	Main(m)
}
