package etcd

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/go-logr/logr"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/reconkit/reconkit/backoff"
	"github.com/reconkit/reconkit/election"
	"github.com/reconkit/reconkit/internal/etcdlease"
	"github.com/reconkit/reconkit/internal/term"
)

// Campaign implements election.Elector. It returns an error at once if this
// candidate already campaigns or leads, and election.ErrClosed after Close.
//
// When the wait ends, Campaign renews the lease and checks that its key
// still exists with its create revision before it returns the term: etcd's
// concurrency.Election.Campaign returns success even when the session
// expired while it waited (etcd issue 19597); this one returns an error
// wrapping election.ErrLeadershipLost instead.
func (e *Elector) Campaign(ctx context.Context) (election.Leadership, error) {
	l, err := e.CampaignEtcd(ctx)
	if err != nil {
		return nil, err
	}
	return l, nil
}

// CampaignEtcd is Campaign returning the concrete etcd term, for hosts that
// need its Guard or Txn (a version gate's guarded status writes, say)
// without a type assertion.
func (e *Elector) CampaignEtcd(ctx context.Context) (*Leadership, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("election: campaign: %w", err)
	}
	e.mu.Lock()
	switch {
	case e.closed:
		e.mu.Unlock()
		return nil, election.ErrClosed
	case e.campaigning || (e.cur != nil && !e.cur.core.Ended()):
		e.mu.Unlock()
		return nil, fmt.Errorf("election: campaign: %s already campaigns or leads", e.identity)
	}
	e.campaigning = true
	e.mu.Unlock()
	begun := e.clock.Now()
	defer func() {
		e.mu.Lock()
		e.campaigning = false
		e.mu.Unlock()
	}()

	// The wait also ends when the elector closes.
	cctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := context.AfterFunc(e.ctx, func() { cancel(election.ErrClosed) })
	defer stop()

	l, vacated, err := e.campaignOnce(cctx, ctx)
	if err != nil {
		if errors.Is(context.Cause(cctx), election.ErrClosed) {
			return nil, election.ErrClosed
		}
		return nil, fmt.Errorf("election: campaign: %w", err)
	}
	// The term is reported, and the leader flag raised, before its loops
	// start: only they see it lost, and its monitor reports its end
	// however it ends (a Close or a Resign meanwhile included; Close waits
	// for the loops), so the end is reported after the start. A term won
	// as the elector closed is released at once, its loops never started:
	// neither its start nor its end is reported.
	e.mu.Lock()
	closed := e.closed
	if !closed {
		e.cur = l
		e.leading.Follow(l.core.Context())
		e.wg.Add(2) // keep and monitor, started below
	}
	e.mu.Unlock()
	if closed {
		_ = l.core.ReleaseDetached(election.ErrClosed, e.releaseTimeout)
		return nil, election.ErrClosed
	}
	now := e.clock.Now()
	var handover time.Duration
	if !vacated.IsZero() {
		handover = now.Sub(vacated)
	}
	e.report.Acquired(l.core.Token(), now.Sub(begun), handover)
	go l.keep()
	go l.monitor()
	if e.termStarted != nil {
		e.termStarted(l)
	}
	return l, nil
}

// campaignOnce runs one campaign on a fresh lease: cctx bounds the wait,
// parent lends the term its values (the logger), not its cancellation. It
// also returns when the last predecessor's key was seen deleted (zero if
// there was none). The term's loops are not started: the caller starts
// them once it has reported the term, or releases it.
func (e *Elector) campaignOnce(cctx, parent context.Context) (l *Leadership, vacated time.Time, err error) {
	log := logr.FromContextOrDiscard(parent).WithValues("identity", e.identity)
	grant, err := e.client.Grant(cctx, int64(e.ttl/time.Second))
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("grant lease: %w", err)
	}
	lease := grant.ID
	// The session keeps the lease alive until the term's cleanup orphans
	// it, or the elector closes.
	sess, err := concurrency.NewSession(e.client, concurrency.WithLease(lease), concurrency.WithContext(e.ctx))
	if err != nil {
		e.revoke(log, lease)
		return nil, time.Time{}, fmt.Errorf("start session: %w", err)
	}
	defer func() {
		if err != nil {
			sess.Orphan()
			e.revoke(log, lease)
		}
	}()

	key := e.keyPrefix + strconv.FormatInt(int64(lease), 16)
	resp, err := e.client.Txn(cctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, e.identity, clientv3.WithLease(lease))).
		Commit()
	if err != nil {
		return nil, time.Time{}, fmt.Errorf("put candidate key: %w", err)
	}
	if !resp.Succeeded {
		return nil, time.Time{}, fmt.Errorf("candidate key %s exists already", key)
	}
	rev := resp.Header.Revision

	// Wait until every key created before ours is gone, or the session
	// dies (then ours is gone too).
	wctx, wcancel := context.WithCancelCause(cctx)
	defer wcancel(nil)
	stopSess := context.AfterFunc(sess.Ctx(), func() {
		wcancel(fmt.Errorf("%w: session ended while waiting", election.ErrLeadershipLost))
	})
	defer stopSess()
	vacated, err = e.waitDeletes(wctx, rev-1)
	if err != nil {
		if cause := context.Cause(wctx); cause != nil && cctx.Err() == nil {
			return nil, time.Time{}, cause
		}
		return nil, time.Time{}, err
	}

	// Confirm: renew the lease (so the term's validity starts from now)
	// and check that the key is still ours.
	start := e.clock.Now()
	validUntil, seen, err := e.confirm(cctx, key, rev, lease, start)
	if err != nil {
		return nil, time.Time{}, err
	}

	l = &Leadership{e: e, key: key, rev: rev, seen: seen, lease: lease, sess: sess, log: log}
	l.validUntil = validUntil
	l.core = term.New(parent, e.identity, election.Token(rev), l.release)
	l.renewed = make(chan struct{}, 1)
	log.V(1).Info("Elected", "key", key, "token", rev)
	return l, vacated, nil
}

// confirm renews the lease and checks that key still exists with create
// revision rev on that lease. It returns the instant until which the term
// is known valid (start + TTL - margin) and the revision at which the key
// was seen.
func (e *Elector) confirm(ctx context.Context, key string, rev int64, lease clientv3.LeaseID, start time.Time) (time.Time, int64, error) {
	ttl, err := etcdlease.KeepAliveOnce(ctx, e.client, lease)
	if err != nil {
		if errors.Is(err, rpctypes.ErrLeaseNotFound) {
			return time.Time{}, 0, fmt.Errorf("%w: lease expired", election.ErrLeadershipLost)
		}
		return time.Time{}, 0, fmt.Errorf("renew lease: %w", err)
	}
	resp, err := e.client.Txn(ctx).If(
		clientv3.Compare(clientv3.CreateRevision(key), "=", rev),
		clientv3.Compare(clientv3.LeaseValue(key), "=", lease),
	).Commit()
	if err != nil {
		return time.Time{}, 0, fmt.Errorf("check candidate key: %w", err)
	}
	if !resp.Succeeded {
		return time.Time{}, 0, fmt.Errorf("%w: candidate key %s is gone", election.ErrLeadershipLost, key)
	}
	return start.Add(ttl - e.margin), resp.Header.Revision, nil
}

// waitDeletes waits until no key under the prefix has a create revision
// up to maxRev (the keys of the candidates ahead). It returns when it saw
// the last of them deleted, zero if there was none.
//
// A watch that fails or ends without the delete (a proxy or load balancer
// that closes streams, an etcd member that lost its leader, a compaction)
// is re-established after a pause on the elector's clock, growing from
// 100ms to at most 5s, after reading the prefix again: the candidate keeps
// its key, and so its place in the queue, for as long as ctx (which ends
// with the session) lives. A failed read of the prefix is retried the same
// way: only ctx or a real deletion ends the wait, so a transient error
// does not cost the candidate its key.
func (e *Elector) waitDeletes(ctx context.Context, maxRev int64) (time.Time, error) {
	opts := append(clientv3.WithLastCreate(), clientv3.WithMaxCreateRev(maxRev), clientv3.WithKeysOnly())
	var vacated time.Time
	err := backoff.Retry(ctx, func(ctx context.Context) error {
		for {
			resp, err := e.client.Get(ctx, e.keyPrefix, opts...)
			if err != nil {
				return fmt.Errorf("reading the candidates ahead: %w", err)
			}
			if len(resp.Kvs) == 0 {
				return nil
			}
			// Watch from the next revision: a watch that starts at or
			// below the current one is served by etcd's catch-up loop,
			// every 100ms.
			if err := e.waitDelete(ctx, string(resp.Kvs[0].Key), resp.Header.Revision+1); err != nil {
				return err
			}
			vacated = e.clock.Now()
		}
	}, backoff.WithMaxInterval(maxRewatchInterval), backoff.WithClock(e.clock), backoff.WithName("election campaign watch"), backoff.WithRand(e.rand))
	if err != nil {
		return time.Time{}, err
	}
	return vacated, nil
}

// maxRewatchInterval caps the pause before a campaign watches its
// predecessor's key again: a read and a watch every 5s (±20%) at most
// while every watch fails or ends at once, under the library's budget of
// one request a second.
const maxRewatchInterval = 5 * time.Second

// waitDelete watches key from revision rev until it is deleted. It returns
// an error if the watch fails or ends first.
func (e *Elector) waitDelete(ctx context.Context, key string, rev int64) error {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	for wr := range e.client.Watch(wctx, key, clientv3.WithRev(rev)) {
		if err := wr.Err(); err != nil {
			return err
		}
		for _, ev := range wr.Events {
			if ev.Type == mvccpb.DELETE {
				return nil
			}
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return errors.New("watch ended while waiting for a predecessor's key to go")
}

// revoke revokes lease within the release timeout, logging failures.
func (e *Elector) revoke(log logr.Logger, lease clientv3.LeaseID) {
	ctx, cancel := context.WithTimeout(context.Background(), e.releaseTimeout)
	defer cancel()
	if _, err := e.client.Revoke(ctx, lease); err != nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		log.V(1).Info("Revoking the lease failed; it expires by its TTL", "lease", fmt.Sprintf("%x", int64(lease)), "error", err)
	}
}
