package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/namespace"
	"go.uber.org/zap"

	"github.com/reconkit/reconkit/election"
	"github.com/reconkit/reconkit/election/etcd"
	"github.com/reconkit/reconkit/versiongate"
	"github.com/reconkit/reconkit/versiongate/etcdstore"
)

// Keys of --store etcd, under the run's etcd prefix. Each agent campaigns
// under electionPrefix with an etcd.Elector; its terms carry an etcd
// guard, which the etcd store puts in the transaction of every status
// write.
const (
	electionPrefix  = "election"
	gateStatusKey   = "gate/status"
	gateNodesPrefix = "gate/nodes/"
)

// etcdCoordination elects on etcd (election/etcd) and keeps the version
// gate in etcd (versiongate/etcdstore), under a fresh key prefix per run.
type etcdCoordination struct {
	endpoints []string
	prefix    string // this run's etcd key prefix
	external  bool   // --etcd: the keys outlive the run unless deleted
	ttl       time.Duration

	cli  *clientv3.Client // the view's client
	obs  *etcd.Elector
	view *etcdstore.Store
}

func newEtcdCoordination(opts options, endpoints []string) (c *etcdCoordination, err error) {
	c = &etcdCoordination{
		endpoints: endpoints,
		prefix:    fmt.Sprintf("%srun-%x/", opts.etcdPrefix, time.Now().UnixNano()),
		external:  opts.etcd != "",
		ttl:       opts.electionTTL,
	}
	if c.cli, err = c.newClient(endpoints); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = c.cli.Close()
		}
	}()
	if c.obs, err = etcd.New(etcd.Config{Client: c.cli, Prefix: electionPrefix, Identity: "observer", SessionTTL: c.ttl}); err != nil {
		return nil, err
	}
	if c.view, err = gateStore(c.cli); err != nil {
		_ = c.obs.Close()
		return nil, err
	}
	return c, nil
}

func gateStore(cli *clientv3.Client) (*etcdstore.Store, error) {
	return etcdstore.New(cli, etcdstore.Config{StatusKey: gateStatusKey, NodesPrefix: gateNodesPrefix})
}

// newClient returns a client whose keys live under the run's prefix.
//
// Close it only after every goroutine using it has returned: the
// namespace wrapper's Watch races with its Close.
func (c *etcdCoordination) newClient(endpoints []string) (*clientv3.Client, error) {
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return nil, fmt.Errorf("etcd client: %w", err)
	}
	cli.KV = namespace.NewKV(cli.KV, c.prefix)
	cli.Watcher = namespace.NewWatcher(cli.Watcher, c.prefix)
	cli.Lease = namespace.NewLease(cli.Lease, c.prefix)
	return cli, nil
}

// join gives the agent an etcd client that reaches etcd through loopback
// proxies of its own, so that killing the agent can cut its traffic as a
// crash would.
func (c *etcdCoordination) join(name string, h hooks, events election.EventRecorder) (m *member, err error) {
	m = &member{}
	// A return sets the named result to nil before this runs: close
	// what was started through a copy.
	started := m
	defer func() {
		if err != nil {
			_ = started.close()
		}
	}()
	var eps []string
	for _, ep := range c.endpoints {
		scheme, hostPort, ok := strings.Cut(ep, "://")
		if !ok {
			scheme, hostPort = "http", ep
		}
		l, err := startLink(hostPort)
		if err != nil {
			return nil, err
		}
		m.links = append(m.links, l)
		eps = append(eps, scheme+"://"+l.Addr())
	}
	cli, err := c.newClient(eps)
	if err != nil {
		return nil, err
	}
	m.closeFn = cli.Close
	if m.store, err = gateStore(cli); err != nil {
		return nil, err
	}
	m.elector, err = etcd.New(etcd.Config{
		Client:     cli,
		Prefix:     electionPrefix,
		Identity:   name,
		SessionTTL: c.ttl,
		Metrics:    h.Election,
		Events:     events,
	})
	if err != nil {
		return nil, err
	}
	return m, nil
}

func (c *etcdCoordination) observer() election.Elector { return c.obs }
func (c *etcdCoordination) status() versiongate.Store  { return c.view }

func (c *etcdCoordination) where() string {
	return "etcd election and version gate at " + strings.Join(c.endpoints, ",")
}

func (c *etcdCoordination) traffic() string { return "its traffic to etcd" }

// close closes the observer and the view's client. A real etcd (--etcd)
// keeps the run's keys, so they are deleted first.
func (c *etcdCoordination) close(ctx context.Context) error {
	errs := []error{c.obs.Close()}
	if c.external {
		if _, err := c.cli.Delete(ctx, "", clientv3.WithPrefix()); err != nil {
			errs = append(errs, fmt.Errorf("delete etcd prefix %s: %w", c.prefix, err))
		}
	}
	errs = append(errs, c.cli.Close())
	return errors.Join(errs...)
}
