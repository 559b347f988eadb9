package reconkit_test

import (
	"context"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/reconkit/reconkit/election"
	"github.com/reconkit/reconkit/election/etcd"
	"github.com/reconkit/reconkit/versiongate"
	"github.com/reconkit/reconkit/versiongate/etcdstore"
)

// A version gate campaigns on an etcd election only while its node has the
// newest release, and a node serves only once WaitReady says the reconciled
// state is one its release can handle. (It needs a running etcd, so it is
// compiled, not run; examples/nodeagent runs the same wiring.)
func Example_versionGate() {
	ctx := context.Background()
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{"http://127.0.0.1:2379"}})
	if err != nil {
		return
	}
	defer cli.Close()

	elector, err := etcd.New(etcd.Config{Client: cli, Prefix: "/agents/reconciler-leader"})
	if err != nil {
		return
	}
	defer elector.Close()

	// The etcd store is a package of its own, so a host on another store
	// compiles no etcd client.
	store, err := etcdstore.New(cli, etcdstore.Config{StatusKey: "/agents/reconciler-status", NodesPrefix: "/agents/nodes/"})
	if err != nil {
		return
	}
	version, _ := versiongate.ParseVersion("1.4.0")
	minCompatible, _ := versiongate.ParseRelease("1.3.0")
	gate, err := versiongate.New(versiongate.Config{
		Store:                    store,
		NodeID:                   "node-a",
		Version:                  version,
		MinimumReconcilerRelease: minCompatible,
		MinimumCompatibleRelease: minCompatible,
		// An elector is a versiongate.Candidate as it is. The gate
		// resigns a term only after its reconcile returned.
		Candidate: elector,
		// The same function type as election.Run's leader work.
		Reconcile: func(ctx context.Context, l election.Leadership) error {
			return nil // converge shared state, carrying l.Token() on every write
		},
	})
	if err != nil {
		return
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- gate.Run(ctx) }()
	defer func() { cancel(); <-done }() // Run returns once all it started has stopped

	if err := gate.WaitReady(ctx); err != nil {
		return
	}
	// Serve.
}
