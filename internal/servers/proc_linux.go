package servers

import "syscall"

// sysProcAttr makes a child die with this process, so a crashed test binary
// does not leave servers running.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
}
