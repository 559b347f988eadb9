package servers

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// process is one run of a server binary whose output is kept for errors.
type process struct {
	name string
	cmd  *exec.Cmd
	log  *logBuffer
	done chan struct{} // closed when the process has exited
	err  error         // exit status, valid after done
}

func startProcess(name, bin string, args []string, log *logBuffer) (*process, error) {
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("servers: starting %s: %w", name, err)
	}
	p := &process{name: name, cmd: cmd, log: log, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func (p *process) signal(sig syscall.Signal) error {
	if p.exited() {
		return fmt.Errorf("servers: %s is not running", p.name)
	}
	if err := p.cmd.Process.Signal(sig); err != nil {
		return fmt.Errorf("servers: signalling %s: %w", p.name, err)
	}
	return nil
}

// kill sends SIGKILL and waits for the exit.
func (p *process) kill() {
	if !p.exited() {
		p.cmd.Process.Signal(syscall.SIGCONT) // a paused process must still die
		p.cmd.Process.Kill()
	}
	<-p.done
}

// stop asks the process to exit with SIGTERM and kills it after grace.
func (p *process) stop(grace time.Duration) {
	if p.exited() {
		return
	}
	p.cmd.Process.Signal(syscall.SIGCONT)
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		p.kill()
	}
}

// waitUntil polls ready every interval until it returns nil, the process
// exits, or timeout passes. Errors carry the process's last log lines.
func (p *process) waitUntil(ctx context.Context, timeout time.Duration, ready func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		rctx, rcancel := context.WithTimeout(ctx, 2*time.Second)
		last = ready(rctx)
		rcancel()
		if last == nil {
			return nil
		}
		select {
		case <-p.done:
			return fmt.Errorf("servers: %s exited before it was ready (%v); last log lines:\n%s", p.name, p.err, p.log.Tail(20))
		case <-ctx.Done():
			return fmt.Errorf("servers: %s not ready within %s (last check: %v); last log lines:\n%s", p.name, timeout, last, p.log.Tail(20))
		case <-tick.C:
		}
	}
}

// tempDir makes a private directory for a server's state.
func tempDir(pattern string) (string, error) {
	dir, err := os.MkdirTemp("", pattern)
	if err != nil {
		return "", fmt.Errorf("servers: creating a state directory: %w", err)
	}
	return dir, nil
}

// errs joins non-nil errors.
type errs struct {
	mu   sync.Mutex
	list []error
}

func (e *errs) add(err error) {
	if err == nil {
		return
	}
	e.mu.Lock()
	e.list = append(e.list, err)
	e.mu.Unlock()
}

func (e *errs) err() error { return errors.Join(e.list...) }
