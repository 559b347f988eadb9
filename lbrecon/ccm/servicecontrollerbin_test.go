package ccm_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconkit/reconkit/internal/servers"
)

const (
	serviceControllerPkg     = "./internal/cmd/servicecontroller"
	serviceControllerLDFlags = "-s -w"
)

// buildServiceController returns internal/cmd/servicecontroller built
// with -race (see startController for why), from the user cache directory (where internal/testenv
// keeps the servers), building it there on a miss, in the background:
// wait returns the binary's path, or fails the test with the build's
// output.
func buildServiceController(t *testing.T) (wait func() string) {
	t.Helper()
	goBin, err := exec.LookPath("go") // go test puts its toolchain first on PATH
	require.NoError(t, err)
	type result struct {
		bin string
		err error
	}
	done := make(chan result, 1)
	start := time.Now()
	go func() {
		bin, err := serviceControllerBinary(t.Context(), goBin)
		done <- result{bin, err}
	}()
	return func() string {
		t.Helper()
		r := recv(t, done, 15*time.Minute, "go build "+serviceControllerPkg)
		require.NoError(t, r.err)
		t.Logf("servicecontroller ready in %v: %s", time.Since(start).Round(100*time.Millisecond), r.bin)
		return r.bin
	}
}

// serviceControllerBinary returns the path of the servicecontroller binary
// in the user cache directory, building it there when missing. The entry's
// key hashes the link flags and the build ID of every package the binary
// links, as go list -deps -export reports them: a package's build ID
// covers its sources, its dependencies' build IDs, the build flags and the
// toolchain, so any change gives a new entry and a stale binary is never
// run. A build goes to a temporary directory beside the entry and is
// renamed into place, so a process never runs a partial binary, and two
// processes building at once both install a whole one.
func serviceControllerBinary(ctx context.Context, goBin string) (string, error) {
	env := append(os.Environ(), "GOFLAGS=-buildvcs=false")
	list := exec.CommandContext(ctx, goBin, "list", "-race", "-deps", "-export", "-f", "{{.ImportPath}} {{.BuildID}}", serviceControllerPkg)
	list.Env = env
	ids, err := list.Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return "", fmt.Errorf("go list %s: %w\n%s", serviceControllerPkg, err, ee.Stderr)
		}
		return "", fmt.Errorf("go list %s: %w", serviceControllerPkg, err)
	}
	sum := sha256.Sum256(append(ids, "\x00ldflags="+serviceControllerLDFlags...))
	cache, err := servers.CacheDir() // where internal/testenv keeps the servers
	if err != nil {
		return "", fmt.Errorf("no cache directory for the servicecontroller binary: %w", err)
	}
	dir := filepath.Join(cache, "servicecontroller-"+hex.EncodeToString(sum[:])[:16])
	bin := filepath.Join(dir, "servicecontroller")
	if fi, err := os.Stat(bin); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
		now := time.Now()
		_ = os.Chtimes(dir, now, now) // in use: kept by servers.PruneUnused
		return bin, nil
	}
	defer servers.PruneUnused(cache, "servicecontroller", dir, nil)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp(dir, "build-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	build := exec.CommandContext(ctx, goBin, "build", "-race", "-ldflags="+serviceControllerLDFlags, "-o", filepath.Join(tmp, "servicecontroller"), serviceControllerPkg)
	build.Env = env
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s: %w\n%s", serviceControllerPkg, err, out)
	}
	if err := os.Rename(filepath.Join(tmp, "servicecontroller"), bin); err != nil {
		return "", err
	}
	return bin, nil
}
