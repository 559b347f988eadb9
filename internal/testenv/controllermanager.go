package testenv

import (
	"context"
	"testing"
	"time"

	"github.com/reconkit/reconkit/internal/servers"
)

// ControllerManagerInstance is a running kube-controller-manager owned by
// a test.
type ControllerManagerInstance struct {
	*servers.ControllerManager
}

// ControllerManager starts kube-controller-manager against a, with only the
// node lifecycle controller unless extraArgs choose others with
// --controllers, and stops it when the test ends. extraArgs are appended to
// its command line (for example --node-monitor-grace-period=20s). The
// binary is built on first use, with the apiserver. It skips the test under
// -short.
func ControllerManager(t testing.TB, a *APIServerInstance, extraArgs ...string) *ControllerManagerInstance {
	t.Helper()
	bins := Binaries(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	m, err := servers.StartControllerManager(ctx, servers.ControllerManagerOptions{Binary: bins.KubeControllerManager, APIServer: a.APIServer, ExtraArgs: extraArgs})
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
