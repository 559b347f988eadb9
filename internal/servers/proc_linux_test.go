package servers

import (
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// waitStopped returns once every thread of a process has stopped after
// SIGSTOP, and fails within its bound on a process that runs.
func TestWaitStopped(t *testing.T) {
	cmd := exec.Command("sleep", "60")
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	pid := cmd.Process.Pid
	require.Error(t, waitStopped(pid, 50*time.Millisecond), "a running process is not stopped")
	require.NoError(t, cmd.Process.Signal(syscall.SIGSTOP))
	require.NoError(t, waitStopped(pid, time.Minute))
	stopped, err := allThreadsStopped(pid)
	require.NoError(t, err)
	require.True(t, stopped)
	require.NoError(t, cmd.Process.Signal(syscall.SIGCONT))
	require.Eventually(t, func() bool {
		s, err := allThreadsStopped(pid)
		return err == nil && !s
	}, time.Minute, time.Millisecond, "running again after SIGCONT")
}
