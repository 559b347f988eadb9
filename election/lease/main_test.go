package lease_test

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/reconkit/reconkit/internal/servers"
	"github.com/reconkit/reconkit/internal/testenv"
)

// shared is the kube-apiserver (on an etcd of its own) that the real-server
// tests of this package share, started by the first of them and stopped by
// TestMain: starting one per test cost about as much as the tests
// themselves. Tests that restart or reconfigure the apiserver start their
// own with testenv.APIServer. Tests sharing it use Leases of unique names.
var shared struct {
	once sync.Once
	a    *servers.APIServer
	err  error
}

// sharedAPIServer returns the package's shared kube-apiserver, starting it
// on first use. It skips the test under -short.
func sharedAPIServer(t *testing.T) *testenv.APIServerInstance {
	t.Helper()
	bins := testenv.Binaries(t) // skips under -short
	shared.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		shared.a, shared.err = servers.StartAPIServer(ctx, servers.APIServerOptions{Binaries: bins})
	})
	if shared.err != nil {
		t.Fatalf("starting the shared kube-apiserver: %v", shared.err)
	}
	return &testenv.APIServerInstance{APIServer: shared.a}
}

func TestMain(m *testing.M) {
	code := m.Run()
	if shared.a != nil {
		_ = shared.a.Close()
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: errors on successful test run: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}
