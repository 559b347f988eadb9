package main

import (
	"context"
	"time"

	"github.com/reconkit/reconkit/election"
	"github.com/reconkit/reconkit/versiongate"
)

// coordination is what the agents elect on and keep the version gate in:
// a Lease election and versiongate/kubestore on the Kubernetes API
// (--store kube, the default), or an etcd election and
// versiongate/etcdstore on etcd (--store etcd). The rest of the program
// is the same on both.
type coordination interface {
	// join connects agent name: an elector of its own and a gate store
	// of its own, both reaching the server through links of their own, so
	// that a scenario can cut the agent off as a crash or a partition
	// would.
	join(name string, hooks hooks, events election.EventRecorder) (*member, error)
	// observer is the view's elector: it observes and never campaigns.
	observer() election.Elector
	// status is the view's store, to read the gate status.
	status() versiongate.Store
	// where says where the agents coordinate, for the live view.
	where() string
	// traffic names what a cut holds, for the narrative.
	traffic() string
	// close closes the observer and the clients, and deletes what this run
	// wrote on a server that outlives it.
	close(ctx context.Context) error
}

// member is one agent's part of the coordination.
type member struct {
	elector agentElector
	store   versiongate.Store
	links   []link       // the agent's own way to the server
	closeFn func() error // closes the agent's client, after the elector
}

// agentElector is an elector of either backend, with what the agent uses
// beyond election.Elector.
type agentElector interface {
	election.Elector
	HealthCheck(grace time.Duration) *election.HealthCheck
	Close() error
}

// close closes the member's elector, its client and its links, in that
// order.
func (m *member) close() error {
	// A failed release (a killed agent's traffic is cut) is no loss: the
	// term expires.
	if m.elector != nil {
		_ = m.elector.Close()
	}
	var err error
	if m.closeFn != nil {
		err = m.closeFn()
	}
	closeLinks(m.links)
	return err
}
