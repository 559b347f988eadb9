package ccmtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"k8s.io/client-go/rest"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/reconkit/reconkit/lbrecon/ccm/internal/lbwire"
)

var (
	// ErrUnsupportedConfig reports a Config that cannot be started: a
	// required field missing, or a rest.Config field the controller's
	// process cannot have.
	ErrUnsupportedConfig = errors.New("ccmtest: unsupported config")
	// ErrNotReady reports a controller's process that ended, or did not
	// sync its informers within Config.StartTimeout, before it was ready.
	ErrNotReady = errors.New("ccmtest: the controller did not become ready")
	// ErrExited reports a controller's process that exited although
	// nobody stopped or killed it.
	ErrExited = errors.New("ccmtest: the controller exited on its own")
	// ErrCallsInFlight reports load-balancer calls still running
	// Config.StopTimeout after the controller's process ended: the
	// Balancer does not honour its context.
	ErrCallsInFlight = errors.New("ccmtest: load-balancer calls still in flight")
)

// Config configures a service controller.
type Config struct {
	// REST is the apiserver the controller works on. Required. Its host,
	// TLS settings, credentials (bearer token or its file, basic auth,
	// client certificate, exec or auth-provider plugin), impersonation,
	// QPS and Burst cross to the controller's process; a field that is a
	// Go value (Transport, WrapTransport, Dial, Proxy, RateLimiter) is
	// refused with ErrUnsupportedConfig.
	REST *rest.Config
	// Balancer is the load balancer the controller drives, in this
	// process. Required.
	Balancer cloudprovider.LoadBalancer
	// ClusterName is the cluster name the controller passes to every
	// call. Empty means "kubernetes", a cloud-controller-manager's default.
	ClusterName string
	// Workers is the number of service workers. Zero means 1, a
	// cloud-controller-manager's default (--concurrent-service-syncs).
	Workers int
	// Log receives the controller process's standard output and error
	// (klog), as well as [Controller.Log] keeping their last 64 KiB. Nil
	// means only the latter.
	Log io.Writer
	// StartTimeout bounds how long Start waits for the controller's
	// informers to sync. Zero means one minute.
	StartTimeout time.Duration
	// StopTimeout bounds how long Stop waits for the process to exit
	// before it kills it, and how long Stop and Kill wait for the calls
	// in flight to return once the process ended. Zero means one minute.
	StopTimeout time.Duration
}

// Controller is k8s.io/cloud-provider's service controller running in a
// process of its own, its load-balancer calls served in this process by
// the Balancer of its Config. Its methods are safe for concurrent use.
type Controller struct {
	cfg     Config
	dir     string // kubeconfig and race reports; removed once ended
	tracker *tracker
	srv     *http.Server
	served  chan struct{} // closed once srv.Serve returned
	cmd     *exec.Cmd
	exited  chan struct{} // closed once cmd.Wait returned and the report pipe ended
	log     *tailBuffer

	mu       sync.Mutex
	ending   bool        // Stop or Kill began
	waitErr  error       // cmd.Wait's error; set before exited closes
	report   childReport // what the process reported; set before exited closes
	selfExit bool        // the process exited before Stop or Kill began
	ended    chan struct{}
	endErr   error
}

// Start starts the service controller on cfg.REST's apiserver with
// cfg.Balancer and returns once its informers synced. The controller's
// process is the test binary itself, started again: its TestMain must call
// [Main], or Start fails with ErrNotReady saying so. When ctx ends, the
// controller is stopped as by Stop. Every Controller must be stopped
// (Stop, Kill, or ctx): until then, it holds a process, a loopback
// listener and a temporary directory.
//
// Start must not be called inside a testing/synctest bubble: the calls
// arrive over a loopback connection, which a bubble does not count as
// durably blocking (see the package documentation).
func Start(ctx context.Context, cfg Config) (*Controller, error) { return startWith(ctx, cfg, nil) }

// startWith is Start; edit, if not nil, changes what the controller's process
// is told (a test's way to make it fail).
func startWith(ctx context.Context, cfg Config, edit func(*childConfig)) (*Controller, error) {
	if cfg.REST == nil || cfg.Balancer == nil {
		return nil, fmt.Errorf("%w: REST and Balancer are required", ErrUnsupportedConfig)
	}
	if cfg.Workers < 0 {
		return nil, fmt.Errorf("%w: Workers %d is negative", ErrUnsupportedConfig, cfg.Workers)
	}
	if cfg.ClusterName == "" {
		cfg.ClusterName = "kubernetes"
	}
	if cfg.Workers == 0 {
		cfg.Workers = 1
	}
	if cfg.StartTimeout <= 0 {
		cfg.StartTimeout = time.Minute
	}
	if cfg.StopTimeout <= 0 {
		cfg.StopTimeout = time.Minute
	}
	kc, err := kubeconfig(cfg.REST)
	if err != nil {
		return nil, err
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("ccmtest: finding the test binary: %w", err)
	}
	dir, err := os.MkdirTemp("", "ccmtest-")
	if err != nil {
		return nil, fmt.Errorf("ccmtest: %w", err)
	}
	ok := false
	defer func() {
		if !ok {
			os.RemoveAll(dir)
		}
	}()
	kcPath := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kcPath, kc, 0o600); err != nil {
		return nil, fmt.Errorf("ccmtest: %w", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("ccmtest: listening for the load-balancer calls: %w", err)
	}
	child := childConfig{Kubeconfig: kcPath, QPS: cfg.REST.QPS, Burst: cfg.REST.Burst,
		URL: "http://" + ln.Addr().String(), Cluster: cfg.ClusterName, Workers: cfg.Workers}
	if edit != nil {
		edit(&child)
	}
	spec, err := json.Marshal(child)
	if err != nil {
		ln.Close()
		return nil, fmt.Errorf("ccmtest: %w", err)
	}

	c := &Controller{cfg: cfg, dir: dir, tracker: &tracker{lb: cfg.Balancer}, served: make(chan struct{}),
		exited: make(chan struct{}), log: &tailBuffer{max: 64 << 10}, ended: make(chan struct{})}
	c.srv = &http.Server{Handler: lbwire.Handler(c.tracker), ReadHeaderTimeout: 10 * time.Second}
	go func() {
		defer close(c.served)
		_ = c.srv.Serve(ln) // http.ErrServerClosed once the controller ended
	}()
	repR, repW, err := os.Pipe()
	if err != nil {
		c.closeServer()
		return nil, fmt.Errorf("ccmtest: %w", err)
	}

	// -test.run=^$: a binary whose TestMain does not call Main runs no
	// test, exits, and Start says what is missing.
	c.cmd = exec.Command(exe, "-test.run=^$")
	var out io.Writer = c.log
	if cfg.Log != nil {
		out = io.MultiWriter(c.log, cfg.Log)
	}
	c.cmd.Stdout, c.cmd.Stderr = out, out
	c.cmd.ExtraFiles = []*os.File{repW} // reportFD
	// The upstream controller's own data race goes to files of its own
	// (the process is a -race binary when the tests are), never to the
	// test's output.
	c.cmd.Env = append(os.Environ(), envKey+"="+string(spec),
		"GORACE="+strings.TrimSpace(os.Getenv("GORACE")+" log_path="+filepath.Join(dir, "race")))
	if _, err := c.cmd.StdinPipe(); err != nil { // it ends when this process dies
		repR.Close()
		repW.Close()
		c.closeServer()
		return nil, fmt.Errorf("ccmtest: %w", err)
	}
	if err := c.cmd.Start(); err != nil {
		repR.Close()
		repW.Close()
		c.closeServer()
		return nil, fmt.Errorf("ccmtest: starting the controller's process: %w", err)
	}
	repW.Close() // the child holds the only write end: its exit ends the reports
	readyCh := make(chan error, 1)
	reported := make(chan childReport, 1)
	go func() {
		defer repR.Close()
		reported <- readReports(repR, readyCh)
	}()
	go func() {
		err := c.cmd.Wait()
		rep := <-reported // the process exited: its report pipe ended
		c.mu.Lock()
		c.waitErr, c.selfExit, c.report = err, !c.ending, rep
		c.mu.Unlock()
		close(c.exited)
	}()

	timer := time.NewTimer(cfg.StartTimeout)
	defer timer.Stop()
	var notReady error
	select {
	case err := <-readyCh:
		if err != nil {
			<-c.exited
			notReady = c.notReadyErr()
		}
	case <-timer.C:
		notReady = fmt.Errorf("%w: its informers did not sync within %v; its output:\n%s", ErrNotReady, cfg.StartTimeout, c.log.String())
	case <-ctx.Done():
		notReady = fmt.Errorf("ccmtest: starting the controller: %w", context.Cause(ctx))
	}
	if notReady != nil {
		_ = c.Kill()
		return nil, notReady
	}
	ok = true
	go func() {
		select {
		case <-ctx.Done():
			_ = c.Stop()
		case <-c.ended:
		case <-c.exited:
			// On its own, or stopped: either way the process is gone;
			// release what it used unless Stop or Kill does.
			c.mu.Lock()
			ending := c.ending
			c.mu.Unlock()
			if !ending {
				_ = c.end(false)
			}
		}
	}()
	return c, nil
}

// notReadyErr says why a process that exited before it was ready did
// so: the failure it reported, or, if it reported none, that its TestMain
// may not call Main.
func (c *Controller) notReadyErr() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if reason, ok := strings.CutPrefix(c.report.end, reportFailed+": "); ok {
		return fmt.Errorf("%w: it failed before its informers synced: %s", ErrNotReady, reason)
	}
	return fmt.Errorf("%w: its process exited (%v) before its informers synced, reporting nothing; does the test binary's TestMain call ccmtest.Main? Its output:\n%s",
		ErrNotReady, c.waitErr, c.log.String())
}

// Stop stops the controller as an operator would (SIGTERM: the
// controller's context ends), kills it if it has not exited within
// Config.StopTimeout, then waits for the load-balancer calls it had in
// flight to return. It returns nil, or ErrCallsInFlight; a later call
// returns what the first returned.
func (c *Controller) Stop() error { return c.end(true) }

// Kill crashes the controller (SIGKILL), then ends the contexts of the
// load-balancer calls it had in flight (their connection closes) and waits
// for them to return: what a crashed cloud-controller-manager leaves
// behind is what its calls had done. It returns nil, or ErrCallsInFlight;
// a later call, or Stop, returns what the first returned.
func (c *Controller) Kill() error { return c.end(false) }

func (c *Controller) end(graceful bool) error {
	c.mu.Lock()
	if c.ending {
		c.mu.Unlock()
		<-c.ended
		return c.endErr
	}
	c.ending = true
	c.mu.Unlock()

	if graceful {
		_ = c.cmd.Process.Signal(syscall.SIGTERM)
		timer := time.NewTimer(c.cfg.StopTimeout)
		select {
		case <-c.exited:
		case <-timer.C:
		}
		timer.Stop()
	}
	_ = c.cmd.Process.Kill() // an exited process: os.ErrProcessDone
	<-c.exited
	c.closeServer()
	var err error
	timer := time.NewTimer(c.cfg.StopTimeout)
	select {
	case <-c.tracker.drained():
	case <-timer.C:
		err = fmt.Errorf("%w after %v", ErrCallsInFlight, c.cfg.StopTimeout)
	}
	timer.Stop()
	c.endErr = err
	os.RemoveAll(c.dir)
	close(c.ended)
	return err
}

// closeServer closes the listener and every connection, which ends the
// contexts of the calls in flight, and waits for Serve to return.
func (c *Controller) closeServer() {
	_ = c.srv.Close()
	<-c.served
}

// Done returns a channel closed once the controller's process exited:
// stopped, killed, or on its own (then Err says why).
func (c *Controller) Done() <-chan struct{} { return c.exited }

// Err returns an ErrExited error, with the exit status and the tail of the
// process's output, once the process exited before Stop or Kill was
// called; nil otherwise.
func (c *Controller) Err() error {
	select {
	case <-c.exited:
	default:
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.selfExit {
		return nil
	}
	tail := lastLines(c.log.String(), 40)
	if reason, ok := strings.CutPrefix(c.report.end, reportFailed+": "); ok {
		return fmt.Errorf("%w: it failed: %s; its output's tail:\n%s", ErrExited, reason, tail)
	}
	if reason, ok := strings.CutPrefix(c.report.end, reportStopped+": "); ok {
		return fmt.Errorf("%w: it stopped (%s) although nobody called Stop or Kill; its output's tail:\n%s", ErrExited, reason, tail)
	}
	// No report: the process crashed or was killed. Its exit status
	// (cmd.Wait's error) says which signal, if any.
	return fmt.Errorf("%w: it ended without a report, crashed or killed (%v); its output's tail:\n%s", ErrExited, c.waitErr, tail)
}

// Calls returns how many load-balancer calls the controller made so far.
func (c *Controller) Calls() Calls { return c.tracker.calls() }

// Log returns the last 64 KiB of the controller process's output.
func (c *Controller) Log() string { return c.log.String() }

// RaceReports returns what the race detector reported in the controller's
// process so far (nothing unless the test binary was built with -race):
// the upstream controller's own data races, kept out of the test's output.
// It returns "" once the controller ended.
func (c *Controller) RaceReports() string {
	files, _ := filepath.Glob(filepath.Join(c.dir, "race.*"))
	var b strings.Builder
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err == nil {
			b.Write(data)
		}
	}
	return b.String()
}
