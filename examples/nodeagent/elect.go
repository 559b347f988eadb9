package main

import (
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/reconkit/reconkit/election/etcd"
)

// electionPrefix is the election's key prefix, under the run's prefix.
const electionPrefix = "election"

// elector is the agent's candidate in the etcd election; the version gate
// campaigns through it while its node has the newest release. An elector is
// a versiongate.Candidate as it is, and the gate resigns a term only after
// its reconcile returned.
type elector struct {
	*etcd.Elector
}

func newElector(cli *clientv3.Client, identity string, ttl time.Duration) (*elector, error) {
	e, err := etcd.New(etcd.Config{Client: cli, Prefix: electionPrefix, Identity: identity, SessionTTL: ttl})
	if err != nil {
		return nil, err
	}
	return &elector{e}, nil
}

// close closes the elector, which releases a term still held.
func (e *elector) close() {
	// A failed release (a killed agent's client is closed) is no loss:
	// the lease expires by its TTL.
	_ = e.Close()
}
