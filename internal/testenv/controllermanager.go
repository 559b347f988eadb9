package testenv

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/reconkit/reconkit/internal/servers"
)

// ControllerManagerInstance is a running kube-controller-manager owned by
// a test.
type ControllerManagerInstance struct {
	*servers.ControllerManager
}

// controllerManager builds kube-controller-manager once per test binary,
// with no time limit of its own, as binaries does.
var controllerManager = sync.OnceValues(func() (string, error) {
	return servers.BuildControllerManager(context.Background(), servers.BuildOptions{Logf: func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "testenv: "+format+"\n", args...)
	}})
})

// ControllerManager starts kube-controller-manager against a, with only the
// node lifecycle controller unless extraArgs choose others with
// --controllers, and stops it when the test ends. extraArgs are appended to
// its command line (for example --node-monitor-grace-period=20s). The
// binary is built on first use. It skips the test under -short.
func ControllerManager(t testing.TB, a *APIServerInstance, extraArgs ...string) *ControllerManagerInstance {
	t.Helper()
	skipShort(t)
	bin, err := controllerManager()
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	m, err := servers.StartControllerManager(ctx, servers.ControllerManagerOptions{Binary: bin, APIServer: a.APIServer, ExtraArgs: extraArgs})
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("kube-controller-manager's last log lines:\n%s", m.Logs(40))
		}
		m.Close()
	})
	return &ControllerManagerInstance{ControllerManager: m}
}
