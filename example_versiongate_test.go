package reconkit_test

import (
	"context"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/reconkit/reconkit/election"
	"github.com/reconkit/reconkit/versiongate"
)

// etcdCandidate lets a version gate campaign on an etcd election. The gate
// needs the term's etcd guard for its status writes, which CampaignEtcd
// returns without a type assertion.
type etcdCandidate struct{ e *election.EtcdElector }

func (c etcdCandidate) Campaign(ctx context.Context) (versiongate.Term, error) {
	l, err := c.e.CampaignEtcd(ctx)
	if err != nil {
		return nil, err
	}
	return etcdTerm{l}, nil
}

// etcdTerm is an election term seen as a versiongate.Term.
type etcdTerm struct{ *election.EtcdLeadership }

func (t etcdTerm) Token() uint64 { return uint64(t.EtcdLeadership.Token()) }

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

	elector, err := election.NewEtcd(election.EtcdConfig{Client: cli, Prefix: "/agents/reconciler-leader"})
	if err != nil {
		return
	}
	defer elector.Close()

	version, _ := versiongate.ParseVersion("1.4.0")
	minCompatible, _ := versiongate.ParseRelease("1.3.0")
	gate, err := versiongate.New(versiongate.Config{
		Client:                   cli,
		NodeID:                   "node-a",
		Version:                  version,
		MinimumReconcilerRelease: minCompatible,
		MinimumCompatibleRelease: minCompatible,
		StatusKey:                "/agents/reconciler-status",
		NodesPrefix:              "/agents/nodes/",
		Candidate:                etcdCandidate{elector},
		Reconcile: func(ctx context.Context, token uint64) error {
			return nil // converge shared state, carrying token on every write
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
