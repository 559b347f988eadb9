package servers

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"syscall"
	"time"
)

// Logf receives progress messages. A nil Logf discards them.
type Logf func(format string, args ...any)

func (l Logf) printf(format string, args ...any) {
	if l != nil {
		l(format, args...)
	}
}

// tool describes a module under internal/tools and the server binaries
// built from it, all in one go build so that they share the compile of
// what they have in common.
type tool struct {
	name     string            // directory under internal/tools
	version  string            // upstream release, for messages and the cache key
	binaries map[string]string // binary name -> package path in the module
	ldflags  string
	expect   string // what a cold build costs, for the progress message
}

const (
	etcdBinary              = "etcd"
	apiserverBinary         = "kube-apiserver"
	controllerManagerBinary = "kube-controller-manager"
)

var (
	etcdTool = tool{
		name:     "etcd",
		version:  "v3.7.3",
		binaries: map[string]string{etcdBinary: "."},
		ldflags:  "-s -w",
		expect:   "about 30 seconds",
	}
	// kubeTool builds kube-apiserver and kube-controller-manager from one
	// module: asked for both, one go build compiles k8s.io/kubernetes'
	// shared packages once and links the two binaries side by side.
	kubeTool = tool{
		name:    "kube",
		version: "v1.37.1",
		binaries: map[string]string{
			apiserverBinary:         "./kube-apiserver",
			controllerManagerBinary: "./kube-controller-manager",
		},
		ldflags: "-s -w" +
			" -X k8s.io/component-base/version.gitVersion=v1.37.1" +
			" -X k8s.io/component-base/version.gitMajor=1" +
			" -X k8s.io/component-base/version.gitMinor=37",
		expect: "about 4 minutes on 2 cores for the apiserver, 5 to 6 for both; once",
	}
)

// Binaries are the paths of built server binaries.
type Binaries struct {
	Etcd          string
	KubeAPIServer string
	// KubeControllerManager is set when BuildOptions.ControllerManager
	// asked for it.
	KubeControllerManager string
}

// BuildOptions configure Build.
type BuildOptions struct {
	// Logf receives progress while a binary is built or waited for.
	Logf Logf
	// CacheDir is where binaries are kept. Empty means $RECONKIT_TESTENV_CACHE
	// if set, else os.UserCacheDir()/reconkit/testenv.
	CacheDir string
	// ToolsDir is the directory holding the etcd and kube tool modules.
	// Empty means internal/tools of the reconkit checkout this package was
	// compiled from, or of the module in the working directory.
	ToolsDir string
	// SkipAPIServer builds only etcd.
	SkipAPIServer bool
	// ControllerManager builds kube-controller-manager too, in the same go
	// build as the apiserver (unless SkipAPIServer).
	ControllerManager bool
}

// Build makes sure the server binaries exist, building them if needed, and
// returns their paths. It is safe to call from several processes at once:
// each binary is built by one of them while the others wait.
func Build(ctx context.Context, opts BuildOptions) (Binaries, error) {
	toolsDir, err := findToolsDir(opts.ToolsDir)
	if err != nil {
		return Binaries{}, err
	}
	cacheDir, err := cacheDirOf(opts)
	if err != nil {
		return Binaries{}, err
	}
	var bins Binaries
	built, err := ensure(ctx, etcdTool, toolsDir, cacheDir, opts.Logf, etcdBinary)
	if err != nil {
		return Binaries{}, err
	}
	bins.Etcd = built[etcdBinary]
	want := []string{apiserverBinary}
	if opts.ControllerManager {
		want = append(want, controllerManagerBinary)
	}
	if !opts.SkipAPIServer {
		built, err = ensure(ctx, kubeTool, toolsDir, cacheDir, opts.Logf, want...)
		if err != nil {
			return Binaries{}, err
		}
		bins.KubeAPIServer = built[apiserverBinary]
		bins.KubeControllerManager = built[controllerManagerBinary]
	}
	return bins, nil
}

// cacheDirOf is where Build keeps binaries for opts.
func cacheDirOf(opts BuildOptions) (string, error) {
	if opts.CacheDir != "" {
		return opts.CacheDir, nil
	}
	return CacheDir()
}

// CacheDir is where Build keeps binaries by default:
// $RECONKIT_TESTENV_CACHE if set, else os.UserCacheDir()/reconkit/testenv.
func CacheDir() (string, error) {
	if env := os.Getenv("RECONKIT_TESTENV_CACHE"); env != "" {
		return env, nil
	}
	base, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("servers: no cache directory for binaries: %w", err)
	}
	return filepath.Join(base, "reconkit", "testenv"), nil
}

// findToolsDir locates internal/tools.
func findToolsDir(explicit string) (string, error) {
	if explicit != "" {
		return explicit, checkToolsDir(explicit)
	}
	if env := os.Getenv("RECONKIT_TOOLS_DIR"); env != "" {
		return env, checkToolsDir(env)
	}
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		dir := filepath.Join(filepath.Dir(file), "..", "tools")
		if checkToolsDir(dir) == nil {
			return filepath.Clean(dir), nil
		}
	}
	out, err := exec.Command(goBinary(), "env", "GOMOD").Output()
	if err == nil {
		if gomod := strings.TrimSpace(string(out)); gomod != "" && gomod != os.DevNull {
			dir := filepath.Join(filepath.Dir(gomod), "internal", "tools")
			if checkToolsDir(dir) == nil {
				return dir, nil
			}
		}
	}
	return "", errors.New("servers: cannot find internal/tools of the reconkit module; run from a reconkit checkout or set RECONKIT_TOOLS_DIR")
}

func checkToolsDir(dir string) error {
	for _, t := range []tool{etcdTool, kubeTool} {
		if _, err := os.Stat(filepath.Join(dir, t.name, "go.mod")); err != nil {
			return fmt.Errorf("servers: %s is not the tools directory: %w", dir, err)
		}
	}
	return nil
}

// goBinary returns the go command. go run and go test put their toolchain's
// bin directory first on PATH, so this is the toolchain that runs us.
func goBinary() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return "go"
}

// cacheKey identifies a build: the tool module's files, the toolchain and
// the flags. Any change gives a new directory, so stale binaries are never
// reused.
func cacheKey(t tool, srcDir string) (string, error) {
	h := sha256.New()
	var files []string
	err := filepath.WalkDir(srcDir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		if n := d.Name(); strings.HasSuffix(n, ".go") || n == "go.mod" || n == "go.sum" {
			files = append(files, path)
		}
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("servers: reading %s: %w", srcDir, err)
	}
	sort.Strings(files)
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return "", fmt.Errorf("servers: reading %s: %w", f, err)
		}
		rel, _ := filepath.Rel(srcDir, f)
		fmt.Fprintf(h, "%s\x00%d\x00", rel, len(data))
		h.Write(data)
	}
	fmt.Fprintf(h, "%s\x00%s/%s\x00%s", runtime.Version(), runtime.GOOS, runtime.GOARCH, t.ldflags)
	return t.name + "-" + t.version + "-" + hex.EncodeToString(h.Sum(nil))[:12], nil
}

// ensure makes sure the binaries want of t are in the cache, building the
// missing ones with one go build under the cache entry's lock, and returns
// their paths.
func ensure(ctx context.Context, t tool, toolsDir, cacheDir string, logf Logf, want ...string) (map[string]string, error) {
	srcDir := filepath.Join(toolsDir, t.name)
	key, err := cacheKey(t, srcDir)
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(cacheDir, key)
	paths := map[string]string{}
	for _, name := range want {
		if _, ok := t.binaries[name]; !ok {
			return nil, fmt.Errorf("servers: %s builds no binary %s", t.name, name)
		}
		paths[name] = filepath.Join(dir, name)
	}
	missing := func() []string {
		var m []string
		for _, name := range want {
			if !isExecutable(paths[name]) {
				m = append(m, name)
			}
		}
		sort.Strings(m)
		return m
	}
	if len(missing()) == 0 {
		now := time.Now()
		_ = os.Chtimes(dir, now, now) // in use: kept by PruneUnused
		return paths, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("servers: creating %s: %w", dir, err)
	}
	unlock, err := lockFile(ctx, filepath.Join(dir, ".lock"), func() {
		logf.printf("servers: waiting for another process that is building %s %s", strings.Join(missing(), " and "), t.version)
	})
	if err != nil {
		return nil, err
	}
	defer unlock()
	build := missing() // some may have been built by the process we waited for
	if len(build) == 0 {
		return paths, nil
	}
	what := strings.Join(build, " and ")
	if len(build) > 1 {
		what += " (one go build)"
	}
	logf.printf("servers: building %s %s into %s (%s)", what, t.version, dir, t.expect)
	start := time.Now()
	// go build -o <dir>/ names each binary after its package's last path
	// element; the binaries keys are those names.
	tmp := filepath.Join(dir, ".build")
	if err := os.RemoveAll(tmp); err != nil {
		return nil, fmt.Errorf("servers: clearing %s: %w", tmp, err)
	}
	args := []string{"build", "-trimpath", "-ldflags", t.ldflags, "-o", tmp + string(filepath.Separator)}
	for _, name := range build {
		args = append(args, t.binaries[name])
	}
	out := newLogBuffer(64 << 10)
	cmd := exec.CommandContext(ctx, goBinary(), args...)
	cmd.Dir = srcDir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=-mod=readonly", "GOWORK=off")
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("servers: starting the build of %s: %w", what, err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	tick := time.NewTicker(30 * time.Second)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			defer os.RemoveAll(tmp)
			if err != nil {
				return nil, fmt.Errorf("servers: building %s %s in %s failed: %w\n%s", what, t.version, srcDir, err, out.Tail(30))
			}
			for _, name := range build {
				if err := os.Rename(filepath.Join(tmp, name), paths[name]); err != nil {
					return nil, fmt.Errorf("servers: installing %s: %w", name, err)
				}
			}
			logf.printf("servers: built %s in %s", what, time.Since(start).Round(time.Second))
			PruneUnused(cacheDir, t.name, dir, logf)
			return paths, nil
		case <-tick.C:
			logf.printf("servers: still building %s (%s so far)", what, time.Since(start).Round(time.Second))
		}
	}
}

// UnusedEntryLifetime is how long Build keeps a cache entry that no build
// has used: every change to a tool module, the toolchain or the flags makes
// a new entry, from 40 to 200 MB.
const UnusedEntryLifetime = 7 * 24 * time.Hour

// PruneUnused removes the entries named name-* in cacheDir, other than
// keep, that no build has used for UnusedEntryLifetime. An entry in use is
// touched at every Build that finds it (a caller keeping entries of its own
// there does the same), and a running server keeps its open binary, so
// only abandoned entries go. Errors are logged and otherwise ignored: a
// leftover entry only costs disk space.
func PruneUnused(cacheDir, name, keep string, logf Logf) {
	entries, _ := filepath.Glob(filepath.Join(cacheDir, name+"-*"))
	for _, dir := range entries {
		fi, err := os.Stat(dir)
		if err != nil || !fi.IsDir() || dir == keep || time.Since(fi.ModTime()) <= UnusedEntryLifetime {
			continue
		}
		if err := os.RemoveAll(dir); err != nil {
			logf.printf("servers: removing the unused %s: %v", dir, err)
			continue
		}
		logf.printf("servers: removed %s, unused since %s", dir, fi.ModTime().Format(time.DateOnly))
	}
}

func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

// lockFile takes an exclusive flock on path, calling waiting once if another
// process holds it, and gives up when ctx ends.
func lockFile(ctx context.Context, path string, waiting func()) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("servers: opening lock %s: %w", path, err)
	}
	told := false
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() {
				syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
				f.Close()
			}, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("servers: locking %s: %w", path, err)
		}
		if !told {
			waiting()
			told = true
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("servers: waiting for the build lock %s: %w", path, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}
