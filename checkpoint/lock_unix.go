//go:build unix

package checkpoint

import (
	"errors"
	"os"
	"syscall"
)

// flock takes an exclusive, non-blocking flock(2) on f. The lock belongs to
// the open file description, so it is released when f is closed or the
// process dies, even by SIGKILL.
func flock(f *os.File) error {
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, syscall.EINTR):
			continue
		case errors.Is(err, syscall.EWOULDBLOCK):
			return ErrLocked
		default:
			return err
		}
	}
}
