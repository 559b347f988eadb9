package versiongate

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/reconkit/reconkit/backoff"
)

// cleanupTimeout bounds best-effort cleanup requests (revoke, resign) made
// after the gate's context ended.
const cleanupTimeout = 2 * time.Second

// recordState is what the gate knows of its own published record.
type recordState struct {
	// rev is the revision at which the record was published; 0 before.
	rev int64
	// valid is true while the record is known to exist: published, and the
	// local validity deadline not passed.
	valid bool
}

// recordMargin is how much earlier than the server could expire the
// record's lease the gate stops counting on it: a tenth of the TTL, at
// least 500ms, for a difference in clock rates and the latency of
// noticing.
func recordMargin(ttl time.Duration) time.Duration {
	return max(ttl/10, 500*time.Millisecond)
}

// errRecordHeld is returned, and retried, while another lease holds the
// local node's record.
var errRecordHeld = errors.New("the node record is held by another lease (another process with this NodeID, or the record of an earlier run that has not expired yet)")

// publishRecord publishes the local node's record bound to a lease, only if
// no record for this node exists (a second process with the same NodeID
// never takes it over), keeps the lease alive until ctx ends, then revokes
// it so the record goes at once.
//
// It keeps a local validity deadline on RecordClock: the start of the last
// keep-alive the server acknowledged plus the TTL, less a margin. Each
// renewal also checks that the record is still bound to the lease. When the
// deadline passes without a successful renewal (a partition, a hung etcd),
// or the lease or record is gone, the record stops counting as valid at
// once (WaitReady fails, Ready reports false) and publishRecord returns an
// error wrapping ErrRecordLost, before the server can expire the record.
func (g *Gate) publishRecord(ctx context.Context) error {
	log := logr.FromContextOrDiscard(ctx)
	cli := g.cfg.Client
	rc := g.recordClock
	key := g.cfg.NodesPrefix + g.cfg.NodeID
	value, err := EncodeNodeRelease(g.cfg.NodeID, g.cfg.Version)
	if err != nil {
		return err
	}
	ttl := g.cfg.RecordTTL
	margin := recordMargin(ttl)
	var lease clientv3.LeaseID
	var rev int64
	var validUntil time.Time
	err = backoff.Retry(ctx, func(ctx context.Context) error {
		var err error
		lease, rev, validUntil, err = g.tryPublish(ctx, key, value)
		return err
	}, backoff.WithClock(g.clock), backoff.WithName("versiongate: publish node record"))
	if err != nil {
		return err
	}
	// A clean stop revokes the record so it goes at once. A lost one is
	// not revoked: the lease is gone or unreachable, and a revoke through
	// a partition would only delay telling the host to stop serving.
	lost := false
	defer func() {
		if !lost {
			revokeLease(ctx, cli, lease)
		}
	}()
	log.Info("Published node record", "key", key, "release", g.cfg.Version.Release.String(), "lease", fmt.Sprintf("%x", int64(lease)))
	if !rc.Now().Before(validUntil) {
		lost = true
		return fmt.Errorf("%w: publishing %q outlasted the record's TTL less the margin", ErrRecordLost, key)
	}
	g.record.Set(recordState{rev: rev, valid: true})
	defer g.setRecordInvalid()

	interval := ttl / 3
	retry := min(500*time.Millisecond, interval)
	next := interval
	for {
		wait := min(next, validUntil.Sub(rc.Now()))
		t := rc.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C():
		}
		start := rc.Now()
		if !start.Before(validUntil) {
			lost = true
			g.setRecordInvalid()
			return fmt.Errorf("%w: no keep-alive of lease %x acknowledged before its local deadline (TTL %v less %v)", ErrRecordLost, int64(lease), ttl, margin)
		}
		// Bound the renewal by the validity left, on the real clock the
		// request's deadline is measured on.
		rctx, cancel := context.WithTimeout(ctx, validUntil.Sub(start))
		got, err := renewRecord(rctx, cli, key, lease)
		cancel()
		switch {
		case err == nil:
			validUntil = start.Add(got - margin)
			next = interval
		case errors.Is(err, ErrRecordLost):
			lost = true
			g.setRecordInvalid()
			return fmt.Errorf("%q: %w", key, err)
		case ctx.Err() != nil:
			return ctx.Err()
		default:
			log.V(1).Info("Renewing the node record failed; retrying", "err", err.Error(), "validFor", validUntil.Sub(rc.Now()).String())
			next = retry
		}
	}
}

// tryPublish grants a lease and creates the record bound to it, only if no
// record exists under key. It returns an error wrapping errRecordHeld when
// one does, and the local validity deadline of the new record: the start of
// the grant plus the TTL, less the margin.
func (g *Gate) tryPublish(ctx context.Context, key string, value []byte) (clientv3.LeaseID, int64, time.Time, error) {
	cli := g.cfg.Client
	start := g.recordClock.Now()
	grant, err := cli.Grant(ctx, int64(g.cfg.RecordTTL/time.Second))
	if err != nil {
		return 0, 0, time.Time{}, fmt.Errorf("grant lease: %w", err)
	}
	resp, err := cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, string(value), clientv3.WithLease(grant.ID))).
		Else(clientv3.OpGet(key, clientv3.WithKeysOnly())).
		Commit()
	if err != nil {
		revokeLease(ctx, cli, grant.ID)
		return 0, 0, time.Time{}, fmt.Errorf("put node record %q: %w", key, err)
	}
	if !resp.Succeeded {
		revokeLease(ctx, cli, grant.ID)
		holder := int64(0)
		if kvs := resp.Responses[0].GetResponseRange().GetKvs(); len(kvs) > 0 {
			holder = kvs[0].Lease
		}
		return 0, 0, time.Time{}, fmt.Errorf("%w: %q, lease %x", errRecordHeld, key, holder)
	}
	validUntil := start.Add(time.Duration(grant.TTL)*time.Second - recordMargin(g.cfg.RecordTTL))
	return grant.ID, resp.Header.Revision, validUntil, nil
}

// renewRecord keeps lease alive once and checks that key is still bound to
// it. It returns the TTL the server granted, or an error wrapping
// ErrRecordLost when the lease or the record is gone.
func renewRecord(ctx context.Context, cli *clientv3.Client, key string, lease clientv3.LeaseID) (time.Duration, error) {
	ka, err := cli.KeepAliveOnce(ctx, lease)
	if err != nil {
		if errors.Is(err, rpctypes.ErrLeaseNotFound) {
			return 0, fmt.Errorf("%w: lease %x expired", ErrRecordLost, int64(lease))
		}
		return 0, fmt.Errorf("keep lease %x alive: %w", int64(lease), err)
	}
	resp, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.LeaseValue(key), "=", lease)).Commit()
	if err != nil {
		return 0, fmt.Errorf("check node record: %w", err)
	}
	if !resp.Succeeded {
		return 0, fmt.Errorf("%w: the record is no longer bound to lease %x", ErrRecordLost, int64(lease))
	}
	return time.Duration(ka.TTL) * time.Second, nil
}

// setRecordInvalid marks the local record as not (or no longer) valid.
func (g *Gate) setRecordInvalid() {
	if st, ok := g.record.Load(); !ok || st.valid {
		g.record.Set(recordState{rev: st.rev})
	}
	g.ready.Store(false)
}

// revokeLease revokes a lease on a best-effort basis, also after ctx ended.
func revokeLease(ctx context.Context, cli *clientv3.Client, id clientv3.LeaseID) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	if _, err := cli.Revoke(rctx, id); err != nil {
		logr.FromContextOrDiscard(ctx).V(1).Info("Could not revoke lease; it will expire", "lease", fmt.Sprintf("%x", int64(id)), "err", err.Error())
	}
}
