//go:build !unix

package checkpoint

import (
	"errors"
	"os"
)

// flock is not implemented here: refusing is safer than sharing.
func flock(*os.File) error {
	return errors.New("checkpoint: directory locking is not supported on this platform")
}
