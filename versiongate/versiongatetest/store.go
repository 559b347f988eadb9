package versiongatetest

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/reconkit/reconkit/versiongate"
)

// Errors the in-memory store returns.
var (
	// ErrUnavailable is returned by every call of a Conn that is cut off
	// (Cut), and by KeepAlive while keep-alives are dropped.
	ErrUnavailable = errors.New("versiongatetest: store unavailable")
	// ErrCompacted is returned by WatchRecords from a revision older than
	// the last Compact.
	ErrCompacted = errors.New("versiongatetest: revision compacted")
)

// Store is an in-memory versiongate.Store shared by several nodes: each
// node uses its own Conn, whose knobs model that node's view of the
// store. The Store itself is a versiongate.Store too (a Conn without
// knobs set). Create it with NewStore; all methods are safe for concurrent
// use.
//
// It models: one revision counter for every change; record leases that
// expire on the store's clock TTL after their last keep-alive (with a fake
// clock, when the test steps it past); create-if-absent records; status
// writes fenced by the writer's etcd-less term token (Fence raises the
// stored token; a write succeeds only if the stored token is at most the
// writer's, checked under the same lock as the write); writes conditioned
// on no record having changed since a revision; watches that can be held
// back (PauseWatches) or compacted away (Compact). Per Conn: a partition
// (Cut), keep-alives lost while everything else works (DropKeepAlives),
// and injected status write errors (FailWrites).
//
// It does not model: network latency or timeouts (a cut call fails at
// once; it never hangs until its context ends), answers lost after a write
// was applied, etcd's guard comparisons (every term is fenced by its
// token, whatever else it implements), leases rounded to whole seconds or
// raised to a server minimum, or request size limits. Tests of those run
// on real etcd.
type Store struct {
	clock clock.WithDelayedExecution
	def   *Conn

	mu          sync.Mutex
	rev         int64
	compacted   int64
	records     map[string]*record
	leases      map[int64]*lease
	nextLease   int64
	log         []change // record changes after compacted, in order
	status      []byte
	statusRev   int64
	fence       uint64
	fenced      bool
	paused      bool
	pausedAt    int64 // revision visible to watches while paused
	pausedValue []byte
	pausedSRev  int64
	changed     chan struct{} // closed and replaced at every change
}

type record struct {
	value  []byte
	lease  int64
	modRev int64
}

type lease struct {
	id       int64
	record   string
	ttl      time.Duration
	deadline time.Time
}

type change struct {
	rev int64
	rec versiongate.Record
}

// StoreConfig configures NewStore.
type StoreConfig struct {
	// Clock drives lease expiry; nil means the real clock. Use a
	// k8s.io/utils/clock/testing.FakeClock and step it to expire records.
	Clock clock.WithDelayedExecution
}

// NewStore returns an empty in-memory store.
func NewStore(cfg StoreConfig) *Store {
	s := &Store{
		clock: cfg.Clock,
		// Revisions start at 1, as etcd's do, so that every listing is at
		// a positive revision: a write conditioned on it is never taken
		// for an unconditioned one (nodesRev 0).
		rev:     1,
		records: map[string]*record{},
		leases:  map[int64]*lease{},
		changed: make(chan struct{}),
	}
	if s.clock == nil {
		s.clock = clock.RealClock{}
	}
	s.def = s.Conn()
	return s
}

// Conn returns a new connection: one node's view of the store, with its
// own knobs.
func (s *Store) Conn() *Conn { return &Conn{s: s} }

// notifyLocked wakes every watcher.
func (s *Store) notifyLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// Revision returns the store's current revision.
func (s *Store) Revision() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rev
}

// SetStatus stores value as the status (nil deletes it) without any fence,
// as an operator or a test would.
func (s *Store) SetStatus(value []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rev++
	s.status = slices.Clone(value)
	s.statusRev = s.rev
	s.notifyLocked()
}

// Status returns the stored status and whether one exists.
func (s *Store) Status() ([]byte, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.status), s.status != nil
}

// FenceToken returns the highest token that fenced the store, 0 if none.
func (s *Store) FenceToken() uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.fence
}

// ClearFence forgets the highest token that called Fence, as an operator
// deletes the fence key of the etcd store: the next term's Fence succeeds
// whatever its token.
func (s *Store) ClearFence() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fence, s.fenced = 0, false
	s.notifyLocked()
}

// PutRecord creates or replaces the record id with value, bound to no
// lease: a host-owned record.
func (s *Store) PutRecord(id string, value []byte) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r, ok := s.records[id]; ok && r.lease != 0 {
		delete(s.leases, r.lease)
	}
	s.rev++
	s.records[id] = &record{value: slices.Clone(value), modRev: s.rev}
	s.appendLocked(versiongate.Record{ID: id, Value: slices.Clone(value)})
	return s.rev
}

// RemoveRecord deletes the record id, as its lease expiring would.
func (s *Store) RemoveRecord(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r, ok := s.records[id]; ok {
		s.deleteLocked(id, r)
	}
}

// Records returns the records' IDs, sorted.
func (s *Store) Records() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Sorted(maps.Keys(s.records))
}

// Lease returns the lease the record id is bound to, 0 if none or absent.
func (s *Store) Lease(id string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r, ok := s.records[id]; ok {
		return r.lease
	}
	return 0
}

// RevokeLease ends a lease at once, deleting its record, as an operator
// or another process could.
func (s *Store) RevokeLease(id int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.revokeLocked(id)
}

// PauseWatches holds back every watch: watchers see nothing that happens
// until ResumeWatches, as a lagging watch stream would. Reads and writes
// go on.
func (s *Store) PauseWatches() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.paused {
		s.paused, s.pausedAt = true, s.rev
		s.pausedValue, s.pausedSRev = s.status, s.statusRev
	}
}

// ResumeWatches delivers what PauseWatches held back.
func (s *Store) ResumeWatches() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.paused = false
	s.notifyLocked()
}

// Compact forgets the record history up to now: a watch from an older
// revision fails with ErrCompacted and the gate lists again.
func (s *Store) Compact() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.compacted = s.rev
	s.log = nil
	s.notifyLocked()
}

func (s *Store) appendLocked(r versiongate.Record) {
	s.log = append(s.log, change{rev: s.rev, rec: r})
	s.notifyLocked()
}

func (s *Store) deleteLocked(id string, r *record) {
	if r.lease != 0 {
		delete(s.leases, r.lease)
	}
	delete(s.records, id)
	s.rev++
	s.appendLocked(versiongate.Record{ID: id})
}

func (s *Store) revokeLocked(id int64) {
	l, ok := s.leases[id]
	if !ok {
		return
	}
	delete(s.leases, id)
	if r, ok := s.records[l.record]; ok && r.lease == id {
		s.deleteLocked(l.record, r)
	}
}

// armLocked schedules l's expiry check at its deadline. A fake clock runs
// the callback under its own lock, from Step: the check runs on a
// goroutine of its own so that it never waits for s.mu there (a holder of
// s.mu may be waiting for the clock). The goroutine only takes the lock
// and returns.
func (s *Store) armLocked(l *lease) {
	id := l.id
	s.clock.AfterFunc(l.ttl, func() { go s.expire(id) })
}

// expire ends lease id if its deadline has passed.
func (s *Store) expire(id int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if l, ok := s.leases[id]; ok && !s.clock.Now().Before(l.deadline) {
		s.revokeLocked(id)
	}
}

// Conn is one node's connection to a Store; it implements
// versiongate.Store. Its knobs affect only calls made through it.
type Conn struct {
	s *Store

	// guarded by s.mu
	cut            bool
	dropKeepAlives bool
	failWrites     error
	writes         int
	refused        int
}

var (
	_ versiongate.Store = (*Conn)(nil)
	_ versiongate.Store = (*Store)(nil)
)

// Cut partitions the connection: every call fails with ErrUnavailable and
// running watches end with it, until Heal.
func (c *Conn) Cut() { c.set(func() { c.cut = true }) }

// Heal ends a Cut.
func (c *Conn) Heal() { c.set(func() { c.cut = false }) }

// DropKeepAlives makes KeepAlive fail with ErrUnavailable (drop true)
// while every other call works: the record then expires on the store's
// clock.
func (c *Conn) DropKeepAlives(drop bool) { c.set(func() { c.dropKeepAlives = drop }) }

// FailWrites makes Fence and WriteStatus return err without applying
// anything; nil ends it.
func (c *Conn) FailWrites(err error) { c.set(func() { c.failWrites = err }) }

// StatusWrites returns how many status writes this connection applied.
func (c *Conn) StatusWrites() int {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	return c.writes
}

// RefusedWrites returns how many status writes and fences of this
// connection the store refused (a later term's fence, or records changed
// since the write's revision).
func (c *Conn) RefusedWrites() int {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	return c.refused
}

func (c *Conn) set(f func()) {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	f()
	c.s.notifyLocked()
}

// lock takes the store's lock, or fails while the connection is cut.
func (c *Conn) lock(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.s.mu.Lock()
	if c.cut {
		c.s.mu.Unlock()
		return ErrUnavailable
	}
	return nil
}

// PublishRecord implements versiongate.Store.
func (c *Conn) PublishRecord(ctx context.Context, id string, value []byte, ttl time.Duration) (versiongate.RecordLease, error) {
	if err := c.lock(ctx); err != nil {
		return versiongate.RecordLease{}, err
	}
	s := c.s
	defer s.mu.Unlock()
	if r, ok := s.records[id]; ok {
		return versiongate.RecordLease{}, fmt.Errorf("%w: %q, lease %x", versiongate.ErrRecordHeld, id, r.lease)
	}
	if ttl <= 0 {
		return versiongate.RecordLease{}, fmt.Errorf("versiongatetest: TTL %v", ttl)
	}
	s.nextLease++
	l := &lease{id: s.nextLease, record: id, ttl: ttl, deadline: s.clock.Now().Add(ttl)}
	s.leases[l.id] = l
	s.rev++
	s.records[id] = &record{value: slices.Clone(value), lease: l.id, modRev: s.rev}
	s.appendLocked(versiongate.Record{ID: id, Value: slices.Clone(value)})
	s.armLocked(l)
	return versiongate.RecordLease{ID: id, Lease: l.id, TTL: ttl, Revision: s.rev}, nil
}

// KeepAlive implements versiongate.Store.
func (c *Conn) KeepAlive(ctx context.Context, rl versiongate.RecordLease) (time.Duration, error) {
	if err := c.lock(ctx); err != nil {
		return 0, err
	}
	s := c.s
	defer s.mu.Unlock()
	if c.dropKeepAlives {
		return 0, ErrUnavailable
	}
	l, ok := s.leases[rl.Lease]
	if !ok {
		return 0, fmt.Errorf("%w: lease %x expired", versiongate.ErrRecordLost, rl.Lease)
	}
	if r, ok := s.records[rl.ID]; !ok || r.lease != rl.Lease {
		return 0, fmt.Errorf("%w: the record is no longer bound to lease %x", versiongate.ErrRecordLost, rl.Lease)
	}
	l.deadline = s.clock.Now().Add(l.ttl)
	s.armLocked(l)
	return l.ttl, nil
}

// DeleteRecord implements versiongate.Store.
func (c *Conn) DeleteRecord(ctx context.Context, rl versiongate.RecordLease) error {
	if err := c.lock(ctx); err != nil {
		return err
	}
	defer c.s.mu.Unlock()
	c.s.revokeLocked(rl.Lease)
	return nil
}

// ListRecords implements versiongate.Store.
func (c *Conn) ListRecords(ctx context.Context) ([]versiongate.Record, int64, error) {
	if err := c.lock(ctx); err != nil {
		return nil, 0, err
	}
	s := c.s
	defer s.mu.Unlock()
	out := make([]versiongate.Record, 0, len(s.records))
	for _, id := range slices.Sorted(maps.Keys(s.records)) {
		out = append(out, versiongate.Record{ID: id, Value: slices.Clone(s.records[id].value)})
	}
	return out, s.rev, nil
}

// WatchRecords implements versiongate.Store.
func (c *Conn) WatchRecords(ctx context.Context, rev int64, fn func([]versiongate.Record, int64)) error {
	s := c.s
	for {
		if err := c.lock(ctx); err != nil {
			return err
		}
		if rev < s.compacted {
			s.mu.Unlock()
			return fmt.Errorf("%w: watch from %d, compacted at %d", ErrCompacted, rev, s.compacted)
		}
		visible := s.rev
		if s.paused {
			visible = s.pausedAt
		}
		var batch []versiongate.Record
		last := rev
		for _, ch := range s.log {
			if ch.rev > rev && ch.rev <= visible {
				batch = append(batch, versiongate.Record{ID: ch.rec.ID, Value: slices.Clone(ch.rec.Value)})
				last = ch.rev
			}
		}
		wake := s.changed
		s.mu.Unlock()
		if len(batch) > 0 {
			rev = last
			fn(batch, rev)
			continue
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-wake:
		}
	}
}

// ReadStatus implements versiongate.Store.
func (c *Conn) ReadStatus(ctx context.Context) (versiongate.StoredStatus, error) {
	if err := c.lock(ctx); err != nil {
		return versiongate.StoredStatus{}, err
	}
	defer c.s.mu.Unlock()
	return versiongate.StoredStatus{Value: slices.Clone(c.s.status), Revision: c.s.rev}, nil
}

// WatchStatus implements versiongate.Store.
func (c *Conn) WatchStatus(ctx context.Context, rev int64, fn func(versiongate.StoredStatus) bool) error {
	s := c.s
	for {
		if err := c.lock(ctx); err != nil {
			return err
		}
		value, srev := s.status, s.statusRev
		if s.paused {
			value, srev = s.pausedValue, s.pausedSRev
		}
		wake := s.changed
		s.mu.Unlock()
		if srev > rev {
			rev = srev
			if fn(versiongate.StoredStatus{Value: slices.Clone(value), Revision: srev}) {
				return nil
			}
			continue
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-wake:
		}
	}
}

// Fence implements versiongate.Store by the term's token.
func (c *Conn) Fence(ctx context.Context, t versiongate.Term) error {
	if err := c.lock(ctx); err != nil {
		return err
	}
	s := c.s
	defer s.mu.Unlock()
	if c.failWrites != nil {
		return c.failWrites
	}
	tok := t.Token()
	if s.fenced && s.fence > tok {
		c.refused++
		return &versiongate.FencedOffError{Fence: "the in-memory store's fence", Stored: s.fence, Token: tok, Clear: "call Store.ClearFence"}
	}
	s.fence, s.fenced = tok, true
	return nil
}

// WriteStatus implements versiongate.Store.
func (c *Conn) WriteStatus(ctx context.Context, t versiongate.Term, value []byte, nodesRev int64) error {
	if err := c.lock(ctx); err != nil {
		return err
	}
	s := c.s
	defer s.mu.Unlock()
	if c.failWrites != nil {
		return c.failWrites
	}
	if tok := t.Token(); !s.fenced || s.fence > tok {
		c.refused++
		return fmt.Errorf("%w: status not written (token %d, fence %d)", versiongate.ErrLeadershipLost, tok, s.fence)
	}
	if nodesRev > 0 {
		for _, r := range s.records {
			if r.modRev > nodesRev {
				c.refused++
				return fmt.Errorf("%w: status not written (nodes revision %d)", versiongate.ErrNodesChanged, nodesRev)
			}
		}
	}
	s.rev++
	s.status = slices.Clone(value)
	s.statusRev = s.rev
	c.writes++
	s.notifyLocked()
	return nil
}

// The Store's own methods use a connection without knobs.

// PublishRecord implements versiongate.Store.
func (s *Store) PublishRecord(ctx context.Context, id string, value []byte, ttl time.Duration) (versiongate.RecordLease, error) {
	return s.def.PublishRecord(ctx, id, value, ttl)
}

// KeepAlive implements versiongate.Store.
func (s *Store) KeepAlive(ctx context.Context, l versiongate.RecordLease) (time.Duration, error) {
	return s.def.KeepAlive(ctx, l)
}

// DeleteRecord implements versiongate.Store.
func (s *Store) DeleteRecord(ctx context.Context, l versiongate.RecordLease) error {
	return s.def.DeleteRecord(ctx, l)
}

// ListRecords implements versiongate.Store.
func (s *Store) ListRecords(ctx context.Context) ([]versiongate.Record, int64, error) {
	return s.def.ListRecords(ctx)
}

// WatchRecords implements versiongate.Store.
func (s *Store) WatchRecords(ctx context.Context, rev int64, fn func([]versiongate.Record, int64)) error {
	return s.def.WatchRecords(ctx, rev, fn)
}

// ReadStatus implements versiongate.Store.
func (s *Store) ReadStatus(ctx context.Context) (versiongate.StoredStatus, error) {
	return s.def.ReadStatus(ctx)
}

// WatchStatus implements versiongate.Store.
func (s *Store) WatchStatus(ctx context.Context, rev int64, fn func(versiongate.StoredStatus) bool) error {
	return s.def.WatchStatus(ctx, rev, fn)
}

// Fence implements versiongate.Store.
func (s *Store) Fence(ctx context.Context, t versiongate.Term) error { return s.def.Fence(ctx, t) }

// WriteStatus implements versiongate.Store.
func (s *Store) WriteStatus(ctx context.Context, t versiongate.Term, value []byte, nodesRev int64) error {
	return s.def.WriteStatus(ctx, t, value, nodesRev)
}
