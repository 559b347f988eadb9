package main

import (
	"context"
	"fmt"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/reconkit/reconkit/cmd/bench/internal/benchutil"
	"github.com/reconkit/reconkit/internal/servers"
	"github.com/reconkit/reconkit/versiongate"
	"github.com/reconkit/reconkit/versiongate/kubestore"
)

// kubeBackend is the Kubernetes store on the apiserver, in a namespace of
// its own per run.
type kubeBackend struct {
	a       *servers.APIServer
	admin   kubernetes.Interface
	n       atomic.Int64
	rx      atomic.Int64
	clients []kubernetes.Interface
	run     int
	ns      string
	prefix  string // of the namespace of each run; empty: bench-versiongate
}

func newKubeBackend(_ context.Context, a *servers.APIServer) (*kubeBackend, error) {
	admin, err := kubernetes.NewForConfig(a.Config())
	if err != nil {
		return nil, err
	}
	return &kubeBackend{a: a, admin: admin}, nil
}

func (b *kubeBackend) name() string { return "Kubernetes store" }

func (b *kubeBackend) wire() int64 { return b.n.Load() }

func (b *kubeBackend) received() int64 { return b.rx.Load() }

// stat adds the apiserver's etcd to the apiserver: the Kubernetes store's
// cost is both.
func (b *kubeBackend) stat() (servers.ProcStat, error) {
	s, err := b.a.Stat()
	if err != nil {
		return s, err
	}
	e, err := b.a.Etcd.Members[0].Stat()
	if err != nil {
		return s, err
	}
	return servers.ProcStat{CPU: s.CPU + e.CPU, RSS: s.RSS + e.RSS}, nil
}

func (b *kubeBackend) reset(ctx context.Context) error {
	b.run++
	prefix := b.prefix
	if prefix == "" {
		prefix = "bench-versiongate"
	}
	b.ns = fmt.Sprintf("%s-%d", prefix, b.run)
	_, err := b.admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: b.ns}}, metav1.CreateOptions{})
	return err
}

func (b *kubeBackend) store(i int) (versiongate.Store, error) {
	c := i / nodesPerClient
	for len(b.clients) <= c {
		cfg := b.a.Config()
		// The gates' own rate, not client-go's default client-side limit
		// of 5 requests per second per client, is what is measured.
		cfg.QPS, cfg.Burst = -1, 0
		cli, err := kubernetes.NewForConfig(benchutil.CountReceived(benchutil.CountRequests(cfg, &b.n), &b.rx))
		if err != nil {
			return nil, err
		}
		b.clients = append(b.clients, cli)
	}
	return kubestore.New(kubestore.Config{Client: b.clients[c], Namespace: b.ns, Gate: "bench"})
}
