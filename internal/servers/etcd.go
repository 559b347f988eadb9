package servers

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// EtcdOptions configure StartEtcd.
type EtcdOptions struct {
	// Binary is the etcd binary; see Build.
	Binary string
	// Members is the cluster size; 0 means 1.
	Members int
	// Dir holds the members' data directories. Empty means a new temporary
	// directory that Close removes.
	Dir string
	// StartTimeout bounds the wait for the cluster to become healthy; 0
	// means 60 seconds.
	StartTimeout time.Duration
	// ExtraArgs are appended to every member's command line.
	ExtraArgs []string
}

// Etcd is a running etcd cluster of one or more members on 127.0.0.1.
type Etcd struct {
	// Members are the cluster's members, in start order.
	Members []*Member

	dir     string
	ownsDir bool
}

// Member is one etcd server process. Its data directory survives Kill and
// Restart, so a restarted member rejoins with its data.
type Member struct {
	Name    string
	DataDir string

	bin        string
	args       []string
	clientPort int
	timeout    time.Duration
	log        *logBuffer

	mu   sync.Mutex
	proc *process
}

// StartEtcd starts an etcd cluster and waits until every member reports
// healthy.
func StartEtcd(ctx context.Context, opts EtcdOptions) (*Etcd, error) {
	if opts.Binary == "" {
		return nil, fmt.Errorf("servers: StartEtcd needs the etcd binary (see Build)")
	}
	n := opts.Members
	if n == 0 {
		n = 1
	}
	if n < 0 || n > 9 {
		return nil, fmt.Errorf("servers: an etcd cluster of %d members is not supported", n)
	}
	timeout := opts.StartTimeout
	if timeout == 0 {
		timeout = 60 * time.Second
	}
	e := &Etcd{dir: opts.Dir}
	if e.dir == "" {
		dir, err := tempDir("reconkit-etcd-")
		if err != nil {
			return nil, err
		}
		e.dir, e.ownsDir = dir, true
	}
	ports, err := freePorts(2 * n)
	if err != nil {
		return nil, err
	}
	var initial []string
	for i := 0; i < n; i++ {
		initial = append(initial, fmt.Sprintf("m%d=http://127.0.0.1:%d", i, ports[2*i+1]))
	}
	token := fmt.Sprintf("reconkit-%d", time.Now().UnixNano())
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("m%d", i)
		client := fmt.Sprintf("http://127.0.0.1:%d", ports[2*i])
		peer := fmt.Sprintf("http://127.0.0.1:%d", ports[2*i+1])
		m := &Member{
			Name:       name,
			DataDir:    filepath.Join(e.dir, name),
			bin:        opts.Binary,
			clientPort: ports[2*i],
			timeout:    timeout,
			log:        newLogBuffer(256 << 10),
		}
		m.args = append([]string{
			"--name", name,
			"--data-dir", m.DataDir,
			"--listen-client-urls", client,
			"--advertise-client-urls", client,
			"--listen-peer-urls", peer,
			"--initial-advertise-peer-urls", peer,
			"--initial-cluster", strings.Join(initial, ","),
			"--initial-cluster-state", "new",
			"--initial-cluster-token", token,
			// Tests need no durability across machine crashes; a killed
			// process still loses nothing the OS already has.
			"--unsafe-no-fsync",
			"--log-level", "warn",
		}, opts.ExtraArgs...)
		e.Members = append(e.Members, m)
	}
	for _, m := range e.Members {
		if err := m.start(); err != nil {
			e.Close()
			return nil, err
		}
	}
	var wg sync.WaitGroup
	var all errs
	for _, m := range e.Members {
		wg.Add(1)
		go func() {
			defer wg.Done()
			all.add(m.waitHealthy(ctx))
		}()
	}
	wg.Wait()
	if err := all.err(); err != nil {
		e.Close()
		return nil, err
	}
	return e, nil
}

// Endpoints returns every member's client URL.
func (e *Etcd) Endpoints() []string {
	eps := make([]string, len(e.Members))
	for i, m := range e.Members {
		eps[i] = m.ClientURL()
	}
	return eps
}

// Close kills every member and removes the data directories it created.
func (e *Etcd) Close() error {
	for _, m := range e.Members {
		m.Kill()
	}
	if e.ownsDir {
		if err := os.RemoveAll(e.dir); err != nil {
			return fmt.Errorf("servers: removing %s: %w", e.dir, err)
		}
	}
	return nil
}

// ClientURL returns the member's client URL, http://127.0.0.1:port.
func (m *Member) ClientURL() string { return "http://" + m.ClientAddr() }

// ClientAddr returns the member's client address, 127.0.0.1:port, for a
// Proxy.
func (m *Member) ClientAddr() string { return fmt.Sprintf("127.0.0.1:%d", m.clientPort) }

// Logs returns the member's last n log lines.
func (m *Member) Logs(n int) string { return m.log.Tail(n) }

func (m *Member) start() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.proc != nil && !m.proc.exited() {
		return fmt.Errorf("servers: etcd member %s is already running", m.Name)
	}
	p, err := startProcess("etcd member "+m.Name, m.bin, m.args, m.log)
	if err != nil {
		return err
	}
	m.proc = p
	return nil
}

func (m *Member) current() *process {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.proc
}

// Running reports whether the member's process is alive (paused counts).
func (m *Member) Running() bool {
	p := m.current()
	return p != nil && !p.exited()
}

// Kill ends the member with SIGKILL, as a crash would. Its data stays.
func (m *Member) Kill() {
	if p := m.current(); p != nil {
		p.kill()
	}
}

// Pause stops the member with SIGSTOP: it holds its connections but
// answers nothing, like a hung machine. On Linux it returns once every
// thread of the process has stopped, so no request sent after it is
// answered.
func (m *Member) Pause() error {
	p := m.current()
	if p == nil {
		return fmt.Errorf("servers: etcd member %s was never started", m.Name)
	}
	if err := p.signal(syscall.SIGSTOP); err != nil {
		return err
	}
	return waitStopped(p.cmd.Process.Pid, 10*time.Second)
}

// Resume continues a paused member with SIGCONT.
func (m *Member) Resume() error {
	p := m.current()
	if p == nil {
		return fmt.Errorf("servers: etcd member %s was never started", m.Name)
	}
	return p.signal(syscall.SIGCONT)
}

// Restart kills the member if it runs, starts it again on the same ports
// with the same data directory, and waits until it reports healthy.
func (m *Member) Restart(ctx context.Context) error {
	m.Kill()
	if err := m.start(); err != nil {
		return err
	}
	return m.waitHealthy(ctx)
}

// waitHealthy polls the member's /health endpoint.
func (m *Member) waitHealthy(ctx context.Context) error {
	url := m.ClientURL() + "/health"
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	return m.current().waitUntil(ctx, m.timeout, func(ctx context.Context) error {
		body, err := probe(ctx, client, "health", url, "")
		if err != nil {
			return err
		}
		var h struct {
			Health string `json:"health"`
			Reason string `json:"reason"`
		}
		if err := json.Unmarshal(body, &h); err != nil {
			return fmt.Errorf("health answer %q: %w", body, err)
		}
		if h.Health != "true" {
			return fmt.Errorf("unhealthy: %s", h.Reason)
		}
		return nil
	})
}
