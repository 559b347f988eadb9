package storecheck

import (
	"context"
	"slices"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/reconkit/reconkit/versiongate"
)

// IgnoreNodesRev returns s with a defect: WriteStatus drops its condition
// on the node records (nodesRev). The checker must reject its histories;
// tests use it to prove that it can.
func IgnoreNodesRev(s versiongate.Store) versiongate.Store { return ignoreNodesRev{s} }

type ignoreNodesRev struct{ versiongate.Store }

func (s ignoreNodesRev) WriteStatus(ctx context.Context, t versiongate.Term, value []byte, _ int64) error {
	return s.Store.WriteStatus(ctx, t, value, 0)
}

// Stale is a store with a defect: ListRecords and ReadStatus answer from a
// snapshot taken at the last Refresh (the first call takes one), as a
// reader that trusts a cache would. Every other method passes through.
// Safe for concurrent use.
type Stale struct {
	versiongate.Store

	mu      sync.Mutex
	taken   bool
	records []versiongate.Record
	listRev int64
	status  versiongate.StoredStatus
}

// NewStale returns s answering reads from snapshots.
func NewStale(s versiongate.Store) *Stale { return &Stale{Store: s} }

// Refresh takes a new snapshot.
func (s *Stale) Refresh(ctx context.Context) error {
	recs, rev, err := s.Store.ListRecords(ctx)
	if err != nil {
		return err
	}
	st, err := s.Store.ReadStatus(ctx)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.taken, s.records, s.listRev, s.status = true, recs, rev, st
	return nil
}

func (s *Stale) snapshot(ctx context.Context) error {
	s.mu.Lock()
	taken := s.taken
	s.mu.Unlock()
	if taken {
		return nil
	}
	return s.Refresh(ctx)
}

// ListRecords answers from the snapshot.
func (s *Stale) ListRecords(ctx context.Context) ([]versiongate.Record, int64, error) {
	if err := s.snapshot(ctx); err != nil {
		return nil, 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.records), s.listRev, nil
}

// ReadStatus answers from the snapshot.
func (s *Stale) ReadStatus(ctx context.Context) (versiongate.StoredStatus, error) {
	if err := s.snapshot(ctx); err != nil {
		return versiongate.StoredStatus{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.status, nil
}

// Lag is a store whose listings and record watches answer late, as a slow
// network or a loaded server would: a correct store stays correct under
// it, the answers being stale by the delay but true of their revision.
// Zero delays pass through.
type Lag struct {
	versiongate.Store
	// List delays each ListRecords answer after the store gave it.
	List time.Duration
	// Watch delays each batch of record changes.
	Watch time.Duration
	// Clock measures the delays; nil means the real clock.
	Clock clock.Clock
}

func (l *Lag) wait(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	c := l.Clock
	if c == nil {
		c = clock.RealClock{}
	}
	t := c.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// ListRecords lists, then waits l.List before answering.
func (l *Lag) ListRecords(ctx context.Context) ([]versiongate.Record, int64, error) {
	recs, rev, err := l.Store.ListRecords(ctx)
	if err != nil {
		return recs, rev, err
	}
	if err := l.wait(ctx, l.List); err != nil {
		return nil, 0, err
	}
	return recs, rev, nil
}

// WatchRecords delays every batch by l.Watch.
func (l *Lag) WatchRecords(ctx context.Context, rev int64, fn func([]versiongate.Record, int64)) error {
	return l.Store.WatchRecords(ctx, rev, func(changes []versiongate.Record, rev int64) {
		if l.wait(ctx, l.Watch) == nil {
			fn(changes, rev)
		}
	})
}

// Reader returns s answering ListRecords and ReadStatus from c's snapshot
// and everything else itself: several nodes sharing one stale cache.
func (c *Stale) Reader(s versiongate.Store) versiongate.Store { return staleReader{Store: s, c: c} }

type staleReader struct {
	versiongate.Store
	c *Stale
}

func (r staleReader) ListRecords(ctx context.Context) ([]versiongate.Record, int64, error) {
	return r.c.ListRecords(ctx)
}

func (r staleReader) ReadStatus(ctx context.Context) (versiongate.StoredStatus, error) {
	return r.c.ReadStatus(ctx)
}
