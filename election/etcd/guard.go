package etcd

import (
	"context"
	"errors"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/reconkit/reconkit/election"
)

// Guard returns the comparison that holds exactly while this term's
// candidate key exists: CreateRevision(Key()) == Token(). Put it in the If
// of every leader-only transaction.
func (l *Leadership) Guard() clientv3.Cmp {
	return clientv3.Compare(clientv3.CreateRevision(l.key), "=", l.rev)
}

// Txn returns a transaction under the guard, with the shape of a plain
// clientv3.Txn: If, Then and Else hold the caller's comparisons and
// operations, and Commit runs them as GuardedTxn does. Commit returns an
// error wrapping election.ErrNotLeader when the term has ended, whether
// the term already knows it (no round trip) or etcd finds the guard false
// (the candidate key was deleted, its lease revoked, or the key put again
// by somebody else while this process had not noticed): then neither the
// Then nor the Else operations run. Otherwise the response is that of the
// caller's transaction: Succeeded tells whether the caller's comparisons
// held, and Else ran if not.
//
// The guard is not put beside the caller's comparisons in one If: a
// guard that failed there would run the Else operations, a write by a
// deposed leader.
func (l *Leadership) Txn(ctx context.Context) clientv3.Txn {
	return &guardedTxn{l: l, ctx: ctx}
}

// GuardedTxn runs a transaction under the guard: if cmps all hold, thenOps
// run, else elseOps, exactly as a plain transaction; but if the term has
// ended it returns an error wrapping election.ErrNotLeader, and nothing runs. The
// response is that of the inner transaction.
func (l *Leadership) GuardedTxn(ctx context.Context, cmps []clientv3.Cmp, thenOps, elseOps []clientv3.Op) (*clientv3.TxnResponse, error) {
	if err := l.notLeader(); err != nil {
		return nil, err
	}
	resp, err := l.e.client.Txn(ctx).If(l.Guard()).Then(clientv3.OpTxn(cmps, thenOps, elseOps)).Commit()
	if err != nil {
		return nil, fmt.Errorf("election: guarded transaction: %w", err)
	}
	if !resp.Succeeded {
		return nil, fmt.Errorf("%w: term %d of %s has ended in etcd", election.ErrNotLeader, l.rev, l.Identity())
	}
	inner := (*clientv3.TxnResponse)(resp.Responses[0].GetResponseTxn())
	if inner == nil {
		return nil, errors.New("election: guarded transaction: no inner response")
	}
	inner.Header = resp.Header
	return inner, nil
}

// notLeader returns an error wrapping election.ErrNotLeader if the term has ended.
func (l *Leadership) notLeader() error {
	if l.core.Ended() {
		return fmt.Errorf("%w: term %d of %s ended: %w", election.ErrNotLeader, l.rev, l.Identity(), context.Cause(l.core.Context()))
	}
	return nil
}

// guardedTxn is a clientv3.Txn whose Commit is GuardedTxn: the caller's
// transaction runs nested under the guard.
type guardedTxn struct {
	l            *Leadership
	ctx          context.Context
	cmps         []clientv3.Cmp
	thens, elses []clientv3.Op
}

func (g *guardedTxn) If(cs ...clientv3.Cmp) clientv3.Txn {
	g.cmps = append(g.cmps, cs...)
	return g
}

func (g *guardedTxn) Then(ops ...clientv3.Op) clientv3.Txn {
	g.thens = append(g.thens, ops...)
	return g
}

func (g *guardedTxn) Else(ops ...clientv3.Op) clientv3.Txn {
	g.elses = append(g.elses, ops...)
	return g
}

func (g *guardedTxn) Commit() (*clientv3.TxnResponse, error) {
	return g.l.GuardedTxn(g.ctx, g.cmps, g.thens, g.elses)
}
