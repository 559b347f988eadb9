//go:build unix && !linux

package servers

import (
	"syscall"
	"time"
)

func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

// waitStopped does nothing where threads' states cannot be read: SIGSTOP
// takes effect as each thread next enters the kernel.
func waitStopped(int, time.Duration) error { return nil }
