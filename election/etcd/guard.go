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

// Txn returns a transaction whose If always includes Guard, whether or not
// the caller calls If. Its Commit returns an error wrapping election.ErrNotLeader,
// without a round trip, when the term is known to have ended; otherwise a
// response with Succeeded false means the guard or one of the caller's
// comparisons failed (use GuardedTxn to tell which).
func (l *Leadership) Txn(ctx context.Context) clientv3.Txn {
	return &guardedTxn{l: l, txn: l.e.client.Txn(ctx)}
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
		return nil, err
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

// guardedTxn is a clientv3.Txn whose If always includes the guard.
type guardedTxn struct {
	l   *Leadership
	txn clientv3.Txn
	cif bool
}

func (g *guardedTxn) If(cs ...clientv3.Cmp) clientv3.Txn {
	g.cif = true
	g.txn = g.txn.If(append([]clientv3.Cmp{g.l.Guard()}, cs...)...)
	return g
}

func (g *guardedTxn) ensureIf() {
	if !g.cif {
		g.If()
	}
}

func (g *guardedTxn) Then(ops ...clientv3.Op) clientv3.Txn {
	g.ensureIf()
	g.txn = g.txn.Then(ops...)
	return g
}

func (g *guardedTxn) Else(ops ...clientv3.Op) clientv3.Txn {
	g.ensureIf()
	g.txn = g.txn.Else(ops...)
	return g
}

func (g *guardedTxn) Commit() (*clientv3.TxnResponse, error) {
	if err := g.l.notLeader(); err != nil {
		return nil, err
	}
	g.ensureIf()
	return g.txn.Commit()
}
