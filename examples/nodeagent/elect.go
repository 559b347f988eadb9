package main

import (
	"context"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/reconkit/reconkit/election"
	"github.com/reconkit/reconkit/versiongate"
)

// electionPrefix is the election's key prefix, under the run's prefix.
const electionPrefix = "election"

// elector adapts an election.EtcdElector to versiongate.Candidate: the gate
// campaigns through it while its node has the newest release.
type elector struct {
	*election.EtcdElector
}

var _ versiongate.Candidate = (*elector)(nil)

func newElector(cli *clientv3.Client, identity string, ttl time.Duration) (*elector, error) {
	e, err := election.NewEtcd(election.EtcdConfig{Client: cli, Prefix: electionPrefix, Identity: identity, SessionTTL: ttl})
	if err != nil {
		return nil, err
	}
	return &elector{e}, nil
}

// Campaign implements versiongate.Candidate.
func (e *elector) Campaign(ctx context.Context) (versiongate.Term, error) {
	l, err := e.CampaignEtcd(ctx)
	if err != nil {
		return nil, err
	}
	return etcdTerm{l}, nil
}

// close closes the elector, which releases a term still held.
func (e *elector) close() {
	// A failed release (a killed agent's client is closed) is no loss:
	// the lease expires by its TTL.
	_ = e.Close()
}

// etcdTerm is an election term seen as a versiongate.Term: the fencing
// token as a plain number, and the etcd guard for the gate's writes.
type etcdTerm struct {
	*election.EtcdLeadership
}

var _ versiongate.Term = etcdTerm{}

// Token returns the term's fencing token.
func (t etcdTerm) Token() uint64 { return uint64(t.EtcdLeadership.Token()) }
