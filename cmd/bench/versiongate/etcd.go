package main

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/reconkit/reconkit/cmd/bench/internal/benchutil"
	"github.com/reconkit/reconkit/internal/servers"
	"github.com/reconkit/reconkit/versiongate"
	"github.com/reconkit/reconkit/versiongate/etcdstore"
)

// nodesPerClient is how many nodes share one client connection, on both
// backends: one per node would measure connection set-up more than the
// store.
const nodesPerClient = 100

// etcdBackend is the etcd store on the apiserver's etcd, under a prefix of
// its own per run.
type etcdBackend struct {
	member  *servers.Member
	n       atomic.Int64
	rx      atomic.Int64
	clients []*clientv3.Client
	run     int
}

func newEtcdBackend(a *servers.APIServer) (*etcdBackend, error) {
	return &etcdBackend{member: a.Etcd.Members[0]}, nil
}

func (b *etcdBackend) name() string { return "etcd store" }

func (b *etcdBackend) wire() int64 { return b.n.Load() }

func (b *etcdBackend) received() int64 { return b.rx.Load() }

func (b *etcdBackend) stat() (servers.ProcStat, error) { return b.member.Stat() }

func (b *etcdBackend) reset(context.Context) error {
	b.run++
	return nil
}

func (b *etcdBackend) store(i int) (versiongate.Store, error) {
	c := i / nodesPerClient
	for len(b.clients) <= c {
		cli, err := b.client()
		if err != nil {
			return nil, err
		}
		b.clients = append(b.clients, cli)
	}
	prefix := fmt.Sprintf("/bench/versiongate/%d/", b.run)
	return etcdstore.New(b.clients[c], etcdstore.Config{StatusKey: prefix + "status", NodesPrefix: prefix + "nodes/"})
}

func (b *etcdBackend) close() {
	for _, c := range b.clients {
		_ = c.Close()
	}
}

// client connects to the member, counting every unary call and every
// message sent on a stream (a lease keep-alive, a watch request).
func (b *etcdBackend) client() (*clientv3.Client, error) {
	return clientv3.New(clientv3.Config{
		Endpoints:   []string{b.member.ClientURL()},
		DialTimeout: 10 * time.Second,
		Logger:      zap.NewNop(),
		DialOptions: append(benchutil.CountGRPC(&b.n), benchutil.CountGRPCReceived(&b.rx)),
	})
}
