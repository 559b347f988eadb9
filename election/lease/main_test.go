package lease_test

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/reconkit/reconkit/internal/servers"
	"github.com/reconkit/reconkit/internal/testenv"
)

// sharedServer is a kube-apiserver (on an etcd of its own) that the
// real-server tests of this package share, started by the first of them
// and stopped by TestMain: starting one per test cost about as much as the
// tests themselves. Tests that restart the apiserver start their own with
// testenv.APIServer. Tests sharing one use Leases of unique names.
type sharedServer struct {
	args []string
	once sync.Once
	a    *servers.APIServer
	err  error
}

var (
	// plain serves every real-server test but the coordinated ones.
	plain = &sharedServer{}
	// withCLE has Coordinated Leader Election enabled.
	withCLE = &sharedServer{args: []string{
		"--feature-gates=CoordinatedLeaderElection=true",
		"--runtime-config=coordination.k8s.io/v1beta1=true",
	}}
)

// get returns the server, starting it on first use. It skips the test
// under -short.
func (s *sharedServer) get(t *testing.T) *testenv.APIServerInstance {
	t.Helper()
	bins := testenv.Binaries(t) // skips under -short
	s.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		s.a, s.err = servers.StartAPIServer(ctx, servers.APIServerOptions{Binaries: bins, ExtraArgs: s.args})
	})
	if s.err != nil {
		t.Fatalf("starting the shared kube-apiserver: %v", s.err)
	}
	return &testenv.APIServerInstance{APIServer: s.a}
}

func TestMain(m *testing.M) {
	// Let up to 4 tests marked parallel run at once, unless -parallel is
	// given: they wait on lease durations, not on the CPU, so the default
	// (GOMAXPROCS, 2 on a CI runner) left the package's time the sum of
	// their waits.
	if f := flag.Lookup("test.parallel"); f != nil {
		_ = f.Value.Set("4")
	}
	code := m.Run()
	for _, s := range []*sharedServer{plain, withCLE} {
		if s.a != nil {
			_ = s.a.Close()
		}
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: errors on successful test run: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// receiveDeadline bounds, in real time, every wait of the real-server
// tests for something the code under test must do, so that a missed step
// fails with a message instead of hanging until the binary's timeout.
const receiveDeadline = time.Minute

// receive returns the next value of ch and whether ch was open, failing
// the test if neither comes within receiveDeadline.
func receive[T any](t testing.TB, ch <-chan T, what string) (T, bool) {
	t.Helper()
	select {
	case v, ok := <-ch:
		return v, ok
	case <-time.After(receiveDeadline):
		t.Fatalf("waited %v for %s", receiveDeadline, what)
		var zero T
		return zero, false
	}
}

// closeDeadline bounds, in real time, the Close of an elector at a test's
// end: a Close that waits for a term it failed to end fails the test
// instead of hanging the binary.
const closeDeadline = 30 * time.Second

// closeOnCleanup closes c when t ends, failing t if Close does not return
// within closeDeadline (its goroutine is then left behind; the test has
// failed).
func closeOnCleanup(t testing.TB, c io.Closer) {
	t.Cleanup(func() {
		done := make(chan struct{})
		go func() {
			defer close(done)
			_ = c.Close()
		}()
		select {
		case <-done:
		case <-time.After(closeDeadline):
			t.Errorf("Close did not return within %v", closeDeadline)
		}
	})
}
