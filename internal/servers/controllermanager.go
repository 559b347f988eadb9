package servers

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// BuildControllerManager makes sure the kube-controller-manager binary
// exists, building it if needed, and returns its path. Build builds it only
// when asked (BuildOptions.ControllerManager), in the same go build as the
// apiserver; few tests need it. Like Build, it is safe to call from several
// processes at once.
func BuildControllerManager(ctx context.Context, opts BuildOptions) (string, error) {
	toolsDir, err := findToolsDir(opts.ToolsDir)
	if err != nil {
		return "", err
	}
	cacheDir, err := cacheDirOf(opts)
	if err != nil {
		return "", err
	}
	built, err := ensure(ctx, kubeTool, toolsDir, cacheDir, opts.Logf, controllerManagerBinary)
	if err != nil {
		return "", err
	}
	return built[controllerManagerBinary], nil
}

// ControllerManagerOptions configure StartControllerManager.
type ControllerManagerOptions struct {
	// Binary is the kube-controller-manager binary; see
	// BuildControllerManager.
	Binary string
	// APIServer is the apiserver it controls, with its admin credentials.
	APIServer *APIServer
	// Controllers is the --controllers list. Empty means only the node
	// lifecycle controller.
	Controllers []string
	// StartTimeout bounds the wait for /healthz; 0 means 60 seconds.
	StartTimeout time.Duration
	// ExtraArgs are appended to the command line, for example
	// --node-monitor-grace-period=10s.
	ExtraArgs []string
}

// ControllerManager is a running kube-controller-manager on 127.0.0.1. It
// runs without leader election and with the controllers it was asked for.
type ControllerManager struct {
	bin     string
	args    []string
	port    int
	dir     string
	timeout time.Duration
	log     *logBuffer

	mu   sync.Mutex
	proc *process
}

// StartControllerManager writes a kubeconfig for the apiserver's admin and
// starts kube-controller-manager with it, waiting until /healthz answers ok.
func StartControllerManager(ctx context.Context, opts ControllerManagerOptions) (m *ControllerManager, err error) {
	if opts.Binary == "" || opts.APIServer == nil {
		return nil, fmt.Errorf("servers: StartControllerManager needs the binary and an apiserver")
	}
	timeout := opts.StartTimeout
	if timeout == 0 {
		timeout = 60 * time.Second
	}
	dir, err := tempDir("reconkit-kcm-")
	if err != nil {
		return nil, err
	}
	m = &ControllerManager{dir: dir, bin: opts.Binary, timeout: timeout, log: newLogBuffer(256 << 10)}
	// A return sets the named result to nil before this runs: close
	// what was started through a copy.
	started := m
	defer func() {
		if err != nil {
			started.Close()
		}
	}()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := writeKubeconfig(kubeconfig, opts.APIServer); err != nil {
		return nil, err
	}
	ports, err := freePorts(1)
	if err != nil {
		return nil, err
	}
	m.port = ports[0]
	controllers := opts.Controllers
	if len(controllers) == 0 {
		controllers = []string{"node-lifecycle-controller"}
	}
	m.args = append([]string{
		"--kubeconfig", kubeconfig,
		"--authentication-kubeconfig", kubeconfig,
		"--authorization-kubeconfig", kubeconfig,
		"--bind-address", "127.0.0.1",
		"--secure-port", fmt.Sprint(m.port),
		"--cert-dir", filepath.Join(dir, "certs"),
		"--leader-elect=false",
		"--controllers", strings.Join(controllers, ","),
		"--use-service-account-credentials=false",
	}, opts.ExtraArgs...)
	if err := m.start(ctx); err != nil {
		return nil, err
	}
	return m, nil
}

func writeKubeconfig(path string, a *APIServer) error {
	cfg := a.Config()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["test"] = &clientcmdapi.Cluster{Server: cfg.Host, InsecureSkipTLSVerify: true}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{Token: cfg.BearerToken}
	kc.Contexts["test"] = &clientcmdapi.Context{Cluster: "test", AuthInfo: "admin"}
	kc.CurrentContext = "test"
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		return fmt.Errorf("servers: writing the kubeconfig: %w", err)
	}
	return nil
}

func (m *ControllerManager) start(ctx context.Context) error {
	return startProbed(ctx, &m.mu, &m.proc, "kube-controller-manager", m.bin, m.args, m.log,
		m.timeout, "healthz", fmt.Sprintf("https://127.0.0.1:%d/healthz", m.port), "")
}

// Logs returns the controller manager's last n log lines.
func (m *ControllerManager) Logs(n int) string { return m.log.Tail(n) }

// Kill ends the controller manager with SIGKILL.
func (m *ControllerManager) Kill() {
	m.mu.Lock()
	p := m.proc
	m.mu.Unlock()
	if p != nil {
		p.kill()
	}
}

// Close stops the controller manager and removes its state.
func (m *ControllerManager) Close() error {
	m.Kill()
	if err := os.RemoveAll(m.dir); err != nil {
		return fmt.Errorf("servers: removing %s: %w", m.dir, err)
	}
	return nil
}
