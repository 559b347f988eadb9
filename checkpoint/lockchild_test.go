package checkpoint_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reconkit/reconkit/checkpoint"
)

// lockChildEnv makes the re-executed test binary open the store in the
// named directory, say "locked", and wait to be killed.
const lockChildEnv = "RECONKIT_CHECKPOINT_LOCK_DIR"

func lockChild() int {
	s, err := checkpoint.NewFS(checkpoint.FSConfig{Dir: os.Getenv(lockChildEnv)})
	if err == nil {
		err = s.Initialize(context.Background())
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "open:", err)
		return 2
	}
	fmt.Println("locked")
	select {} // until killed
}

// startLockHolder starts a process holding the store in dir and returns
// once it says it holds the lock.
func startLockHolder(t *testing.T, dir string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), lockChildEnv+"="+dir)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	sc := bufio.NewScanner(out)
	require.True(t, sc.Scan(), "lock holder died before taking the lock")
	require.Equal(t, "locked", sc.Text())
	return cmd
}
