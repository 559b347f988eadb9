package versiongate

import (
	"context"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/reconkit/reconkit/backoff"
)

// cleanupTimeout bounds best-effort cleanup requests (revoke, resign) made
// after the gate's context ended.
const cleanupTimeout = 2 * time.Second

// publishRecord publishes the local node's record bound to a lease and
// keeps the lease alive until ctx ends, then revokes it so the record goes
// at once. It returns an error wrapping ErrRecordLost if the lease expires
// first.
func (g *Gate) publishRecord(ctx context.Context) error {
	log := logr.FromContextOrDiscard(ctx)
	cli := g.cfg.Client
	key := g.cfg.NodesPrefix + g.cfg.NodeID
	value, err := EncodeNodeRelease(g.cfg.NodeID, g.cfg.Version)
	if err != nil {
		return err
	}
	var lease clientv3.LeaseID
	var rev int64
	err = backoff.Retry(ctx, func(ctx context.Context) error {
		grant, err := cli.Grant(ctx, int64(g.cfg.RecordTTL/time.Second))
		if err != nil {
			return fmt.Errorf("grant lease: %w", err)
		}
		put, err := cli.Put(ctx, key, string(value), clientv3.WithLease(grant.ID))
		if err != nil {
			revokeLease(ctx, cli, grant.ID)
			return fmt.Errorf("put node record %q: %w", key, err)
		}
		lease, rev = grant.ID, put.Header.Revision
		return nil
	}, backoff.WithClock(g.clock), backoff.WithName("versiongate: publish node record"))
	if err != nil {
		return err
	}
	defer revokeLease(ctx, cli, lease)
	log.Info("Published node record", "key", key, "release", g.cfg.Version.Release.String(), "lease", fmt.Sprintf("%x", int64(lease)))

	ka, err := cli.KeepAlive(ctx, lease)
	if err != nil {
		return fmt.Errorf("%w: keep lease %x alive: %w", ErrRecordLost, int64(lease), err)
	}
	g.record.Set(rev)
	for range ka {
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return fmt.Errorf("%w: lease %x of %q expired", ErrRecordLost, int64(lease), key)
}

// revokeLease revokes a lease on a best-effort basis, also after ctx ended.
func revokeLease(ctx context.Context, cli *clientv3.Client, id clientv3.LeaseID) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	if _, err := cli.Revoke(rctx, id); err != nil {
		logr.FromContextOrDiscard(ctx).V(1).Info("Could not revoke lease; it will expire", "lease", fmt.Sprintf("%x", int64(id)), "err", err.Error())
	}
}
