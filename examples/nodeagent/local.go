package main

// This is the only file of the program that uses reconkit's server harness
// (internal/servers): it builds a real kube-apiserver and etcd from
// internal/tools on the first run (cached afterwards), starts them on free
// loopback ports, and puts loopback proxies in front of them so that a
// scenario can cut an agent's traffic. The harness is internal to the
// reconkit module. Outside this module a host points --etcd and
// --kubeconfig at its own servers, and needs none of this.

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"

	"k8s.io/client-go/rest"

	"github.com/reconkit/reconkit/internal/servers"
)

// localServers are the servers this run started: with --kube local, a
// kube-apiserver on an etcd of its own, and, with --store etcd and no
// --etcd, an etcd for the agents.
type localServers struct {
	etcd *servers.Etcd
	api  *servers.APIServer
}

// startLocal builds what is needed (progress goes to say) and starts an
// etcd when withEtcd, and a kube-apiserver when withKube. On error it
// stops what it started.
func startLocal(ctx context.Context, withEtcd, withKube bool, say func(string, ...any)) (l *localServers, err error) {
	l = &localServers{}
	if !withEtcd && !withKube {
		return l, nil
	}
	// A return sets the named result to nil before this runs: close
	// what was started through a copy.
	started := l
	defer func() {
		if err != nil {
			_ = started.close()
		}
	}()
	bins, err := servers.Build(ctx, servers.BuildOptions{SkipAPIServer: !withKube, Logf: func(format string, args ...any) {
		say("setup: "+format, args...)
	}})
	if err != nil {
		return l, fmt.Errorf("build the local servers: %w", err)
	}
	use := "the kube-apiserver's storage only: no etcd for the agents"
	if withEtcd {
		use = "for the agents' etcd"
		if withKube {
			use += " and the kube-apiserver's storage"
		}
	}
	say("setup: etcd binary %s (%s; built from internal/tools on the first run, then cached)", bins.Etcd, use)
	if withKube {
		say("setup: kube-apiserver binary %s (built from internal/tools on the first run, then cached)", bins.KubeAPIServer)
	}
	if withEtcd {
		l.etcd, err = servers.StartEtcd(ctx, servers.EtcdOptions{Binary: bins.Etcd})
		if err != nil {
			return l, fmt.Errorf("start etcd: %w", err)
		}
	}
	if withKube {
		l.api, err = servers.StartAPIServer(ctx, servers.APIServerOptions{Binaries: bins})
		if err != nil {
			return l, fmt.Errorf("start kube-apiserver: %w", err)
		}
	}
	return l, nil
}

// etcdEndpoints are the client URLs of the local etcd.
func (l *localServers) etcdEndpoints() []string { return l.etcd.Endpoints() }

// etcdDataDir is the local etcd's data directory, removed at close.
func (l *localServers) etcdDataDir() string { return l.etcd.Members[0].DataDir }

// kubeConfig is an admin client configuration of the local apiserver.
func (l *localServers) kubeConfig() *rest.Config { return l.api.Config() }

// kubeDir is the local apiserver's state directory (certificates, keys and
// its etcd's data), removed at close.
func (l *localServers) kubeDir() string {
	return filepath.Dir(filepath.Dir(l.api.Etcd.Members[0].DataDir))
}

// close stops every local server and removes its state.
func (l *localServers) close() error {
	var errs []error
	if l.api != nil {
		errs = append(errs, l.api.Close())
		l.api = nil
	}
	if l.etcd != nil {
		errs = append(errs, l.etcd.Close())
		l.etcd = nil
	}
	return errors.Join(errs...)
}

// link is an agent's own way to etcd or to the kube-apiserver: a loopback
// TCP proxy that a scenario cuts (bytes are held, as in a partition) and
// restores.
type link interface {
	Addr() string
	Cut()
	Restore()
	Close() error
}

func startLink(target string) (link, error) {
	p, err := servers.StartProxy(target)
	if err != nil {
		return nil, fmt.Errorf("proxy to %s: %w", target, err)
	}
	return p, nil
}
