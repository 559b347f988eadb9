package servers

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

// sysProcAttr makes a child die with this process, so a crashed test binary
// does not leave servers running.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
}

// waitStopped waits until every thread of pid is stopped (state T in
// /proc/pid/task/*/stat), for at most bound: SIGSTOP is delivered to each
// thread as it next enters the kernel, so a request sent right after
// kill(2) returns could still be answered by a thread that has not
// stopped yet.
func waitStopped(pid int, bound time.Duration) error {
	deadline := time.Now().Add(bound)
	for {
		stopped, err := allThreadsStopped(pid)
		if err != nil || stopped {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("servers: process %d not stopped within %v of SIGSTOP", pid, bound)
		}
		<-time.After(time.Millisecond)
	}
}

// allThreadsStopped reports whether every thread of pid is stopped.
func allThreadsStopped(pid int) (bool, error) {
	dir := fmt.Sprintf("/proc/%d/task", pid)
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return false, fmt.Errorf("servers: reading %s: %w", dir, err)
	}
	for _, task := range tasks {
		b, err := os.ReadFile(filepath.Join(dir, task.Name(), "stat"))
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue // the thread exited
			}
			return false, fmt.Errorf("servers: reading a thread's state: %w", err)
		}
		// The state follows the command name, which is in parentheses
		// and may itself contain them.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 || i+2 >= len(b) {
			return false, fmt.Errorf("servers: unexpected %s/%s/stat: %q", dir, task.Name(), b)
		}
		if s := b[i+2]; s != 'T' && s != 't' {
			return false, nil
		}
	}
	return true, nil
}
