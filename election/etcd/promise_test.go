package etcd_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/reconkit/reconkit/election"
	"github.com/reconkit/reconkit/internal/testenv"
)

// The token is the create revision of the candidate key, which is also
// what Leader reports for the term, even when the revision moved on while
// the candidate waited (here by its predecessor's resignation).
func TestEtcdTokenIsKeyCreateRevision(t *testing.T) {
	srv := testenv.Etcd(t)
	admin := srv.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	leader := newEtcd(t, testenv.NewEtcdClient(t, srv.Members[0].ClientAddr()), "/token", "leader", steadyTTL)
	held, err := leader.Campaign(ctx)
	require.NoError(t, err)
	e := newEtcd(t, testenv.NewEtcdClient(t, srv.Members[0].ClientAddr()), "/token", "next", steadyTTL)
	won := make(chan election.Leadership, 1)
	go func() {
		l, err := e.Campaign(ctx)
		if err != nil {
			t.Errorf("Campaign: %v", err)
			close(won)
			return
		}
		won <- l
	}()
	require.Eventually(t, func() bool {
		resp, err := admin.Get(ctx, "/token/", clientv3.WithPrefix())
		return err == nil && len(resp.Kvs) == 2
	}, spinDeadline, 10*time.Millisecond, "the second candidate's key")
	require.NoError(t, held.Resign(ctx))
	l := receive(t, won, "the second candidate's term")
	require.NotNil(t, l)
	resp, err := admin.Get(ctx, "/token/", clientv3.WithPrefix())
	require.NoError(t, err)
	require.Len(t, resp.Kvs, 1)
	require.Less(t, resp.Kvs[0].CreateRevision, resp.Header.Revision, "the revision moved on after the key was put")
	require.Equal(t, election.Token(resp.Kvs[0].CreateRevision), l.Token(), "token")
	info, err := e.Leader(ctx)
	require.NoError(t, err)
	require.Equal(t, l.Token(), info.Token, "Leader's token")
	require.NoError(t, l.Resign(ctx))
}

// A candidate whose key was deleted while it waited (by an operator, say,
// with its lease still alive) gets no term when its turn comes: Campaign
// checks the key before it returns.
func TestEtcdCampaignChecksItsKeyBeforeReturning(t *testing.T) {
	srv := testenv.Etcd(t)
	admin := srv.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	leader := newEtcd(t, testenv.NewEtcdClient(t, srv.Members[0].ClientAddr()), "/check", "leader", steadyTTL)
	held, err := leader.Campaign(ctx)
	require.NoError(t, err)
	e := newEtcd(t, testenv.NewEtcdClient(t, srv.Members[0].ClientAddr()), "/check", "waiting", steadyTTL)
	failed := make(chan error, 1)
	go func() {
		l, err := e.Campaign(ctx)
		if err == nil {
			_ = l.Resign(ctx)
		}
		failed <- err
	}()
	// Wait for the waiting candidate's key, then delete it.
	var key string
	require.Eventually(t, func() bool {
		resp, err := admin.Get(ctx, "/check/", clientv3.WithPrefix())
		if err != nil || len(resp.Kvs) < 2 {
			return false
		}
		key = string(resp.Kvs[1].Key)
		return true
	}, spinDeadline, 10*time.Millisecond, "the waiting candidate's key")
	_, err = admin.Delete(ctx, key)
	require.NoError(t, err)
	require.NoError(t, held.Resign(ctx))
	err = receive(t, failed, "Campaign's return")
	require.True(t, errors.Is(err, election.ErrLeadershipLost), "Campaign returned %v", err)
}

// Close stops keeping the term's lease alive without revoking it: a term
// whose holder never resigns ends on the server by its lease's TTL, as a
// crashed holder's does, and not before the holder's own ValidUntil.
func TestEtcdClosedTermNeverResignedEndsByTTL(t *testing.T) {
	t.Parallel() // an etcd of its own; waits on a TTL, not the CPU
	srv := testenv.Etcd(t)
	admin := srv.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const ttl = 2 * time.Second
	a := newEtcd(t, testenv.NewEtcdClient(t, srv.Members[0].ClientAddr()), "/closed", "a", ttl)
	la, err := a.Campaign(ctx)
	require.NoError(t, err)
	b := newEtcd(t, testenv.NewEtcdClient(t, srv.Members[0].ClientAddr()), "/closed", "b", ttl)
	type result struct {
		l   election.Leadership
		err error
	}
	won := make(chan result, 1)
	go func() {
		l, err := b.Campaign(ctx)
		won <- result{l, err}
	}()
	require.Eventually(t, func() bool {
		resp, err := admin.Get(ctx, "/closed/", clientv3.WithPrefix())
		return err == nil && len(resp.Kvs) == 2
	}, spinDeadline, 10*time.Millisecond, "the second candidate's key")

	require.NoError(t, a.Close())
	validUntil := la.(election.Expiring).ValidUntil()
	r := receive(t, won, "b's term after a's lease expired")
	require.NoError(t, r.err, "b's Campaign")
	lb := r.l
	require.True(t, time.Now().After(validUntil), "b won before a's ValidUntil")
	info, err := b.Leader(ctx)
	require.NoError(t, err)
	require.Equal(t, "b", info.Identity)
	require.NoError(t, la.Resign(ctx), "Resign of a term that ended by its TTL")
	require.NoError(t, lb.Resign(ctx))
}
