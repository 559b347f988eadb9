package servers

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/rest"
)

// APIServerOptions configure StartAPIServer.
type APIServerOptions struct {
	// Binaries must name both servers; see Build.
	Binaries Binaries
	// StartTimeout bounds the wait for /readyz; 0 means 120 seconds.
	StartTimeout time.Duration
	// ExtraArgs are appended to the apiserver's command line.
	ExtraArgs []string
}

// APIServer is a kube-apiserver on 127.0.0.1 backed by an etcd of its own.
// It trusts one admin bearer token and authorises everything.
type APIServer struct {
	// Etcd is the apiserver's storage.
	Etcd *Etcd

	bin     string
	args    []string
	port    int
	token   string
	dir     string
	timeout time.Duration
	log     *logBuffer

	mu   sync.Mutex
	proc *process
}

// StartAPIServer starts an etcd and a kube-apiserver on it, and waits until
// /readyz answers ok.
func StartAPIServer(ctx context.Context, opts APIServerOptions) (*APIServer, error) {
	if opts.Binaries.Etcd == "" || opts.Binaries.KubeAPIServer == "" {
		return nil, fmt.Errorf("servers: StartAPIServer needs both binaries (see Build)")
	}
	timeout := opts.StartTimeout
	if timeout == 0 {
		timeout = 120 * time.Second
	}
	dir, err := tempDir("reconkit-apiserver-")
	if err != nil {
		return nil, err
	}
	a := &APIServer{dir: dir, bin: opts.Binaries.KubeAPIServer, timeout: timeout, log: newLogBuffer(256 << 10)}
	if err := a.startAll(ctx, opts); err != nil {
		// a is not returned, so the partial start is undone here (a
		// deferred Close on a named result would see it already nil).
		a.Close()
		return nil, err
	}
	return a, nil
}

// startAPIServerAttempts is how many ports StartAPIServer tries: a free
// port found by listening may be taken by another process before the
// apiserver binds it.
const startAPIServerAttempts = 3

// startAll starts a's etcd, writes its credentials and starts the
// apiserver, on a new port after a start that failed while ctx lasts.
func (a *APIServer) startAll(ctx context.Context, opts APIServerOptions) error {
	var err error
	a.Etcd, err = StartEtcd(ctx, EtcdOptions{Binary: opts.Binaries.Etcd, Dir: filepath.Join(a.dir, "etcd")})
	if err != nil {
		return err
	}
	if err := a.writeCredentials(); err != nil {
		return err
	}
	var errs []error
	for range startAPIServerAttempts {
		ports, err := freePorts(1)
		if err != nil {
			return err
		}
		a.port = ports[0]
		a.args = append([]string{
			"--etcd-servers", strings.Join(a.Etcd.Endpoints(), ","),
			"--bind-address", "127.0.0.1",
			"--advertise-address", "127.0.0.1",
			"--secure-port", fmt.Sprint(a.port),
			"--cert-dir", filepath.Join(a.dir, "certs"),
			"--token-auth-file", filepath.Join(a.dir, "tokens.csv"),
			"--authorization-mode", "AlwaysAllow",
			"--service-account-issuer", "https://kubernetes.default.svc.cluster.local",
			"--service-account-key-file", filepath.Join(a.dir, "sa.pub"),
			"--service-account-signing-key-file", filepath.Join(a.dir, "sa.key"),
			"--service-cluster-ip-range", "10.0.0.0/24",
			// 1.37 refuses a loopback advertise address for the default
			// endpoint reconciler; tests need no kubernetes Service endpoints.
			"--endpoint-reconciler-type", "none",
			"--enable-priority-and-fairness=false",
		}, opts.ExtraArgs...)
		err = a.start(ctx)
		if err == nil {
			return nil
		}
		errs = append(errs, fmt.Errorf("port %d: %w", a.port, err))
		a.Kill()
		if ctx.Err() != nil {
			break
		}
	}
	return fmt.Errorf("servers: starting kube-apiserver: %w", errors.Join(errs...))
}

// writeCredentials writes the admin token file and a service-account key
// pair, made here so that no openssl is needed.
func (a *APIServer) writeCredentials() error {
	tok := make([]byte, 24)
	if _, err := rand.Read(tok); err != nil {
		return fmt.Errorf("servers: admin token: %w", err)
	}
	a.token = hex.EncodeToString(tok)
	tokens := fmt.Sprintf("%s,admin,admin-uid,system:masters\n", a.token)
	if err := os.WriteFile(filepath.Join(a.dir, "tokens.csv"), []byte(tokens), 0o600); err != nil {
		return fmt.Errorf("servers: writing the token file: %w", err)
	}
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return fmt.Errorf("servers: service-account key: %w", err)
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return fmt.Errorf("servers: service-account key: %w", err)
	}
	priv := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	if err := os.WriteFile(filepath.Join(a.dir, "sa.key"), priv, 0o600); err != nil {
		return fmt.Errorf("servers: writing the service-account key: %w", err)
	}
	pubPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub})
	if err := os.WriteFile(filepath.Join(a.dir, "sa.pub"), pubPEM, 0o600); err != nil {
		return fmt.Errorf("servers: writing the service-account key: %w", err)
	}
	return nil
}

func (a *APIServer) start(ctx context.Context) error {
	return startProbed(ctx, &a.mu, &a.proc, "kube-apiserver", a.bin, a.args, a.log,
		a.timeout, "readyz", fmt.Sprintf("https://%s/readyz", a.Addr()), a.token)
}

// Addr returns the apiserver's address, 127.0.0.1:port, for a Proxy.
func (a *APIServer) Addr() string { return fmt.Sprintf("127.0.0.1:%d", a.port) }

// Config returns a new admin client configuration. The server's certificate
// is self-signed, so TLS verification is off: this is for tests on loopback.
func (a *APIServer) Config() *rest.Config {
	return a.ConfigFor(a.Addr())
}

// ConfigFor returns an admin client configuration that dials addr instead,
// for example a Proxy in front of the apiserver.
func (a *APIServer) ConfigFor(addr string) *rest.Config {
	return &rest.Config{
		Host:            "https://" + addr,
		BearerToken:     a.token,
		TLSClientConfig: rest.TLSClientConfig{Insecure: true},
		QPS:             -1, // tests must not be slowed by client-side throttling
	}
}

// Logs returns the apiserver's last n log lines.
func (a *APIServer) Logs(n int) string { return a.log.Tail(n) }

// Restart stops the apiserver (SIGTERM, then SIGKILL after a grace period),
// starts it again on the same port and storage, and waits until it is
// ready.
func (a *APIServer) Restart(ctx context.Context) error {
	a.mu.Lock()
	p := a.proc
	a.mu.Unlock()
	if p != nil {
		p.stop(10 * time.Second)
	}
	return a.start(ctx)
}

// Kill ends the apiserver with SIGKILL.
func (a *APIServer) Kill() {
	a.mu.Lock()
	p := a.proc
	a.mu.Unlock()
	if p != nil {
		p.kill()
	}
}

// Close stops the apiserver and its etcd and removes their state.
func (a *APIServer) Close() error {
	a.Kill()
	if a.Etcd != nil {
		a.Etcd.Close()
	}
	if err := os.RemoveAll(a.dir); err != nil {
		return fmt.Errorf("servers: removing %s: %w", a.dir, err)
	}
	return nil
}
