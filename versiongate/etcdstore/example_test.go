package etcdstore_test

import (
	"context"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/reconkit/reconkit/election/etcd"
	"github.com/reconkit/reconkit/versiongate"
	"github.com/reconkit/reconkit/versiongate/etcdstore"
)

// A gate on etcd: the store and the election share one client, so the
// store fences each term by its etcd guard. (It needs a running etcd, so
// it is compiled, not run; the package's tests run the same wiring on a
// real etcd.)
func ExampleNew() {
	ctx := context.Background()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{"http://127.0.0.1:2379"}})
	if err != nil {
		return
	}
	defer cli.Close()

	store, err := etcdstore.New(cli, etcdstore.Config{
		StatusKey:   "/agents/gate/status",
		NodesPrefix: "/agents/gate/nodes/",
	})
	if err != nil {
		return
	}
	elector, err := etcd.New(etcd.Config{Client: cli, Prefix: "/agents/gate/leader"})
	if err != nil {
		return
	}
	defer elector.Close()

	version, _ := versiongate.ParseVersion("1.4.0")
	gate, err := versiongate.New(versiongate.Config{
		Store:                    store,
		NodeID:                   "node-a",
		Version:                  version,
		MinimumCompatibleRelease: versiongate.Release{Major: 1, Minor: 3},
		Candidate:                elector,
		Reconcile: func(ctx context.Context, l versiongate.Term) error {
			return nil // converge shared state, carrying l.Token()
		},
	})
	if err != nil {
		return
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- gate.Run(ctx) }()
	defer func() { cancel(); <-done }()
	if err := gate.WaitReady(ctx); err != nil {
		return
	}
	// Serve.
}
