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

// tool describes one server binary built from a module under internal/tools.
type tool struct {
	name    string // binary and directory name
	version string // upstream release, for messages and the cache key
	ldflags string
	expect  string // what a cold build costs, for the progress message
}

var (
	etcdTool = tool{
		name:    "etcd",
		version: "v3.7.3",
		ldflags: "-s -w",
		expect:  "about 30 seconds",
	}
	apiserverTool = tool{
		name:    "kube-apiserver",
		version: "v1.37.1",
		ldflags: "-s -w" +
			" -X k8s.io/component-base/version.gitVersion=v1.37.1" +
			" -X k8s.io/component-base/version.gitMajor=1" +
			" -X k8s.io/component-base/version.gitMinor=37",
		expect: "about 4 minutes on 2 cores, once",
	}
)

// Binaries are the paths of built server binaries.
type Binaries struct {
	Etcd          string
	KubeAPIServer string
}

// BuildOptions configure Build.
type BuildOptions struct {
	// Logf receives progress while a binary is built or waited for.
	Logf Logf
	// CacheDir is where binaries are kept. Empty means
	// os.UserCacheDir()/reconkit/testenv.
	CacheDir string
	// ToolsDir is the directory holding the etcd and kube-apiserver tool
	// modules. Empty means internal/tools of the reconkit checkout this
	// package was compiled from, or of the module in the working directory.
	ToolsDir string
	// SkipAPIServer builds only etcd.
	SkipAPIServer bool
}

// Build makes sure the server binaries exist, building them if needed, and
// returns their paths. It is safe to call from several processes at once:
// each binary is built by one of them while the others wait.
func Build(ctx context.Context, opts BuildOptions) (Binaries, error) {
	toolsDir, err := findToolsDir(opts.ToolsDir)
	if err != nil {
		return Binaries{}, err
	}
	cacheDir := opts.CacheDir
	if cacheDir == "" {
		base, err := os.UserCacheDir()
		if err != nil {
			return Binaries{}, fmt.Errorf("servers: no cache directory for binaries: %w", err)
		}
		cacheDir = filepath.Join(base, "reconkit", "testenv")
	}
	var bins Binaries
	bins.Etcd, err = ensure(ctx, etcdTool, toolsDir, cacheDir, opts.Logf)
	if err != nil {
		return Binaries{}, err
	}
	if !opts.SkipAPIServer {
		bins.KubeAPIServer, err = ensure(ctx, apiserverTool, toolsDir, cacheDir, opts.Logf)
		if err != nil {
			return Binaries{}, err
		}
	}
	return bins, nil
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
	for _, t := range []tool{etcdTool, apiserverTool} {
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

func ensure(ctx context.Context, t tool, toolsDir, cacheDir string, logf Logf) (string, error) {
	srcDir := filepath.Join(toolsDir, t.name)
	key, err := cacheKey(t, srcDir)
	if err != nil {
		return "", err
	}
	dir := filepath.Join(cacheDir, key)
	bin := filepath.Join(dir, t.name)
	if isExecutable(bin) {
		return bin, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("servers: creating %s: %w", dir, err)
	}
	unlock, err := lockFile(ctx, filepath.Join(dir, ".lock"), func() {
		logf.printf("servers: waiting for another process that is building %s %s", t.name, t.version)
	})
	if err != nil {
		return "", err
	}
	defer unlock()
	if isExecutable(bin) { // built by the process we waited for
		return bin, nil
	}

	logf.printf("servers: building %s %s into %s (%s)", t.name, t.version, dir, t.expect)
	start := time.Now()
	tmp := filepath.Join(dir, "."+t.name+".tmp")
	out := newLogBuffer(64 << 10)
	cmd := exec.CommandContext(ctx, goBinary(), "build", "-trimpath", "-ldflags", t.ldflags, "-o", tmp, ".")
	cmd.Dir = srcDir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=-mod=readonly", "GOWORK=off")
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		return "", fmt.Errorf("servers: starting the build of %s: %w", t.name, err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	tick := time.NewTicker(30 * time.Second)
	defer tick.Stop()
	for {
		select {
		case err := <-done:
			if err != nil {
				os.Remove(tmp)
				return "", fmt.Errorf("servers: building %s %s in %s failed: %w\n%s", t.name, t.version, srcDir, err, out.Tail(30))
			}
			if err := os.Rename(tmp, bin); err != nil {
				return "", fmt.Errorf("servers: installing %s: %w", t.name, err)
			}
			logf.printf("servers: built %s in %s", t.name, time.Since(start).Round(time.Second))
			return bin, nil
		case <-tick.C:
			logf.printf("servers: still building %s (%s so far)", t.name, time.Since(start).Round(time.Second))
		}
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
