package testenv

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconkit/reconkit/internal/servers"
)

// fakeTools writes tools modules shaped like internal/tools (etcd, and
// kube with its two commands) whose programs print their own names.
func fakeTools(t *testing.T) string {
	t.Helper()
	tools := t.TempDir()
	write := func(rel, content string) {
		path := filepath.Join(tools, rel)
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, []byte(content), 0o644))
	}
	main := func(name string) string {
		return fmt.Sprintf("package main\n\nimport \"fmt\"\n\nfunc main() { fmt.Print(%q) }\n", name)
	}
	write("etcd/go.mod", "module example.com/tools/etcd\n\ngo 1.22\n")
	write("etcd/main.go", main("etcd"))
	write("kube/go.mod", "module example.com/tools/kube\n\ngo 1.22\n")
	write("kube/kube-apiserver/main.go", main("kube-apiserver"))
	write("kube/kube-controller-manager/main.go", main("kube-controller-manager"))
	return tools
}

// buildLog records Build's progress messages.
type buildLog struct {
	mu    sync.Mutex
	lines []string
}

func (l *buildLog) logf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, fmt.Sprintf(format, args...))
}

// builds returns the "building" messages logged since the last call.
func (l *buildLog) builds() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var b []string
	for _, line := range l.lines {
		// "servers: building <what> <version> into <dir> (<expect>)"
		if what, ok := strings.CutPrefix(line, "servers: building "); ok {
			what, _, _ = strings.Cut(what, " v")
			b = append(b, what)
		}
	}
	l.lines = nil
	return b
}

func runsAs(t *testing.T, bin, name string) {
	t.Helper()
	out, err := exec.Command(bin).Output()
	require.NoError(t, err, bin)
	require.Equal(t, name, string(out), bin)
}

// TestBuildCombinesKubeServers: asked for both, kube-apiserver and
// kube-controller-manager come from one go build; binaries in the cache are
// never built again; one asked for alone is built alone.
func TestBuildCombinesKubeServers(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the go toolchain; skipped under -short")
	}
	tools := fakeTools(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	var log buildLog
	both := servers.BuildOptions{ToolsDir: tools, CacheDir: t.TempDir(), ControllerManager: true, Logf: log.logf}
	bins, err := servers.Build(ctx, both)
	require.NoError(t, err)
	require.Equal(t, []string{"etcd", "kube-apiserver and kube-controller-manager (one go build)"}, log.builds())
	runsAs(t, bins.Etcd, "etcd")
	runsAs(t, bins.KubeAPIServer, "kube-apiserver")
	runsAs(t, bins.KubeControllerManager, "kube-controller-manager")
	require.Equal(t, filepath.Dir(bins.KubeAPIServer), filepath.Dir(bins.KubeControllerManager), "one cache entry for one build")

	again, err := servers.Build(ctx, both)
	require.NoError(t, err)
	require.Equal(t, bins, again)
	kcm, err := servers.BuildControllerManager(ctx, both)
	require.NoError(t, err)
	require.Equal(t, bins.KubeControllerManager, kcm)
	require.Empty(t, log.builds(), "binaries in the cache were built again")

	// The apiserver alone, then the controller manager alone.
	apiOnly := servers.BuildOptions{ToolsDir: tools, CacheDir: t.TempDir(), Logf: log.logf}
	bins, err = servers.Build(ctx, apiOnly)
	require.NoError(t, err)
	require.Empty(t, bins.KubeControllerManager)
	require.NoFileExists(t, filepath.Join(filepath.Dir(bins.KubeAPIServer), "kube-controller-manager"))
	require.Equal(t, []string{"etcd", "kube-apiserver"}, log.builds())
	kcm, err = servers.BuildControllerManager(ctx, apiOnly)
	require.NoError(t, err)
	runsAs(t, kcm, "kube-controller-manager")
	require.Equal(t, []string{"kube-controller-manager"}, log.builds())

	// Two builders at once on an empty cache: one builds each binary, the
	// other waits on the lock and then finds it built.
	shared := t.TempDir()
	var wg sync.WaitGroup
	results := make([]servers.Binaries, 2)
	errs := make([]error, 2)
	for i := range 2 {
		wg.Go(func() {
			results[i], errs[i] = servers.Build(ctx, servers.BuildOptions{ToolsDir: tools, CacheDir: shared, ControllerManager: true, Logf: log.logf})
		})
	}
	wg.Wait()
	require.NoError(t, errs[0])
	require.NoError(t, errs[1])
	require.Equal(t, results[0], results[1])
	require.ElementsMatch(t, []string{"etcd", "kube-apiserver and kube-controller-manager (one go build)"}, log.builds(), "concurrent builders built twice")

	// A change to the tool module is a new cache entry.
	require.NoError(t, os.WriteFile(filepath.Join(tools, "kube", "kube-apiserver", "main.go"),
		[]byte("package main\n\nimport \"fmt\"\n\nfunc main() { fmt.Print(\"kube-apiserver 2\") }\n"), 0o644))
	bins, err = servers.Build(ctx, apiOnly)
	require.NoError(t, err)
	runsAs(t, bins.KubeAPIServer, "kube-apiserver 2")
	require.Equal(t, []string{"kube-apiserver"}, log.builds())
}

// TestBuildPrunesUnusedEntries: a build removes the entries of its tool that
// no build has used for servers.UnusedEntryLifetime, and keeps the recent
// ones, other tools' and the ones a build finds in use.
func TestBuildPrunesUnusedEntries(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the go toolchain; skipped under -short")
	}
	tools := fakeTools(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cache := t.TempDir()
	old := time.Now().Add(-servers.UnusedEntryLifetime - time.Hour)
	entry := func(name string, mtime time.Time) string {
		dir := filepath.Join(cache, name)
		require.NoError(t, os.MkdirAll(dir, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "bin"), []byte("x"), 0o755))
		require.NoError(t, os.Chtimes(dir, mtime, mtime))
		return dir
	}
	staleKube := entry("kube-v1.0.0-aaaaaaaaaaaa", old)
	staleLegacy := entry("kube-apiserver-v1.0.0-bbbbbbbbbbbb", old)
	staleEtcd := entry("etcd-v3.0.0-cccccccccccc", old)
	recentKube := entry("kube-v1.0.1-dddddddddddd", time.Now().Add(-time.Hour))
	other := entry("servicecontroller-eeeeeeeeeeee", old)

	opts := servers.BuildOptions{ToolsDir: tools, CacheDir: cache}
	bins, err := servers.Build(ctx, opts)
	require.NoError(t, err)
	require.NoDirExists(t, staleKube)
	require.NoDirExists(t, staleLegacy)
	require.NoDirExists(t, staleEtcd)
	require.DirExists(t, recentKube, "an entry used within the lifetime")
	require.DirExists(t, other, "another tool's entry")

	// An entry a build finds is touched, so it outlives the lifetime of
	// its build; a later build of a changed module keeps it.
	inUse := filepath.Dir(bins.KubeAPIServer)
	require.NoError(t, os.Chtimes(inUse, old, old))
	_, err = servers.Build(ctx, opts)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(tools, "kube", "kube-apiserver", "main.go"),
		[]byte("package main\n\nfunc main() {}\n"), 0o644))
	_, err = servers.Build(ctx, opts)
	require.NoError(t, err)
	require.DirExists(t, inUse, "an entry found in use was removed")
}
