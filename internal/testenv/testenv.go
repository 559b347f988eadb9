package testenv

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/reconkit/reconkit/internal/servers"
)

// Member is one etcd member; see servers.Member.
type Member = servers.Member

// ProxyServer is a loopback TCP proxy whose traffic a test can cut, restore
// and delay; see servers.Proxy.
type ProxyServer = servers.Proxy

// binaries builds the servers once per test binary; other test binaries
// wait on the build lock instead of building again. It builds
// kube-controller-manager too, in the same go build as the apiserver: the
// suite needs both, and one build compiles what they share once. No time
// limit of its own: a cold build took from 4 to 26 minutes on the same kind
// of machine, depending on what else ran, and the test binary's -timeout
// already bounds a build that hangs.
var binaries = sync.OnceValues(func() (servers.Binaries, error) {
	return servers.Build(context.Background(), servers.BuildOptions{ControllerManager: true, Logf: func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "testenv: "+format+"\n", args...)
	}})
})

// Binaries returns the built server binaries, building them on first use.
// It skips the test under -short.
func Binaries(t testing.TB) servers.Binaries {
	t.Helper()
	skipShort(t)
	bins, err := binaries()
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	return bins
}

func skipShort(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("testenv: needs a real etcd or kube-apiserver; skipped under -short")
	}
}

// EtcdCluster is a running etcd cluster owned by a test.
type EtcdCluster struct {
	*servers.Etcd
}

// EtcdOption configures Etcd.
type EtcdOption func(*servers.EtcdOptions)

// Members sets the cluster size (default 1).
func Members(n int) EtcdOption {
	return func(o *servers.EtcdOptions) { o.Members = n }
}

// EtcdArgs appends command-line flags to every member.
func EtcdArgs(args ...string) EtcdOption {
	return func(o *servers.EtcdOptions) { o.ExtraArgs = append(o.ExtraArgs, args...) }
}

// Etcd starts an etcd cluster for the test and stops it when the test ends.
func Etcd(t testing.TB, opts ...EtcdOption) *EtcdCluster {
	t.Helper()
	bins := Binaries(t)
	o := servers.EtcdOptions{Binary: bins.Etcd}
	for _, opt := range opts {
		opt(&o)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	e, err := servers.StartEtcd(ctx, o)
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	t.Cleanup(func() { e.Close() })
	return &EtcdCluster{Etcd: e}
}

// Client returns a client to every member, closed when the test ends.
func (e *EtcdCluster) Client(t testing.TB) *clientv3.Client {
	t.Helper()
	return NewEtcdClient(t, e.Endpoints()...)
}

// NewEtcdClient returns a client to the given endpoints (for example a
// Proxy's address), closed when the test ends. It dials lazily, so a client
// through a cut proxy is created without waiting.
func NewEtcdClient(t testing.TB, endpoints ...string) *clientv3.Client {
	t.Helper()
	eps := make([]string, len(endpoints))
	for i, ep := range endpoints {
		if !strings.Contains(ep, "://") { // a bare host:port
			ep = "http://" + ep
		}
		eps[i] = ep
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:            eps,
		DialTimeout:          5 * time.Second,
		DialKeepAliveTime:    2 * time.Second,
		DialKeepAliveTimeout: 2 * time.Second,
		Logger:               zap.NewNop(),
	})
	if err != nil {
		t.Fatalf("testenv: etcd client: %v", err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// Proxy starts a loopback TCP proxy in front of target (host:port) and
// closes it when the test ends.
func Proxy(t testing.TB, target string) *ProxyServer {
	t.Helper()
	p, err := servers.StartProxy(target)
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// APIServerInstance is a running kube-apiserver owned by a test.
type APIServerInstance struct {
	*servers.APIServer
}

// APIServer starts a kube-apiserver on an etcd of its own for the test and
// stops both when the test ends.
func APIServer(t testing.TB, extraArgs ...string) *APIServerInstance {
	t.Helper()
	bins := Binaries(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	a, err := servers.StartAPIServer(ctx, servers.APIServerOptions{Binaries: bins, ExtraArgs: extraArgs})
	if err != nil {
		t.Fatalf("testenv: %v", err)
	}
	t.Cleanup(func() { a.Close() })
	return &APIServerInstance{APIServer: a}
}
