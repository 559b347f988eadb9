package versiongate_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconkit/reconkit/versiongate"
	"github.com/reconkit/reconkit/versiongate/versiongatetest"
)

// heldStatusReads is a store whose status reads are answered at once and
// returned to the gate only when the test lets them (a send on release):
// a read answered before a change and returned after it, as by a
// goroutine starved between the two.
type heldStatusReads struct {
	versiongate.Store
	reads   atomic.Int64
	release chan struct{}
}

func (s *heldStatusReads) ReadStatus(ctx context.Context) (versiongate.StoredStatus, error) {
	st, err := s.Store.ReadStatus(ctx)
	s.reads.Add(1)
	select {
	case <-s.release:
		return st, err
	case <-ctx.Done():
		return versiongate.StoredStatus{}, ctx.Err()
	}
}

// staleReadGate is a gate that publishes its record on an in-memory store
// holding a status that admits it, rejoins after a loss, never campaigns,
// has its status reads held (store) and the goroutine that follows its
// record for a readiness wait held before its first read, until
// releaseWatcher.
type staleReadGate struct {
	gate           *versiongate.Gate
	mem            *versiongatetest.Store
	store          *heldStatusReads
	releaseWatcher func()
}

// newStaleReadGate makes a staleReadGate and runs it until the test ends;
// call it inside a synctest bubble.
func newStaleReadGate(t *testing.T, conds versiongate.ConditionReporter) *staleReadGate {
	mem := versiongatetest.NewStore(versiongatetest.StoreConfig{})
	mem.SetStatus(doneStatus(t, "1.0.0", "1.0.0"))
	s := &staleReadGate{mem: mem, store: &heldStatusReads{Store: mem, release: make(chan struct{})}}
	cfg := versiongate.Config{
		Store: s.store, NodeID: "a", Version: ver(t, "1.0.0"), MinimumCompatibleRelease: mustRelease(t, "1.0.0"),
		Candidate: neverWins, Reconcile: func(context.Context, versiongate.Term) error { return nil },
		RejoinAfterRecordLoss: true, Conditions: conds,
	}
	g, err := versiongate.New(cfg)
	require.NoError(t, err)
	s.gate = g
	watcher := make(chan struct{})
	var once sync.Once
	s.releaseWatcher = func() { once.Do(func() { close(watcher) }) }
	versiongate.SetBeforeRecordRead(g, func() { <-watcher })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- g.Run(ctx) }()
	t.Cleanup(func() {
		s.releaseWatcher()
		cancel()
		require.NoError(t, receive(t, done, "Run's return"))
	})
	return s
}

// stepBound bounds each wait of these tests on the bubble's clock: the
// gate's keep-alives keep that clock moving, so a wait that would never
// end fails here rather than run until the test binary's timeout.
const stepBound = time.Minute

// releaseRead lets the status read in flight return.
func (s *staleReadGate) releaseRead(t *testing.T) {
	t.Helper()
	select {
	case s.store.release <- struct{}{}:
	case <-time.After(stepBound):
		t.Fatal("no status read in flight")
	}
}

// receive returns the error sent on ch.
func receive(t *testing.T, ch <-chan error, what string) error {
	t.Helper()
	select {
	case err := <-ch:
		return err
	case <-time.After(stepBound):
		t.Fatalf("waiting for %s", what)
		return nil
	}
}

// loseAndRepublish revokes the record the gate counts on, at revision
// waited, and waits until its keep-alive loop found it gone and Run
// published a new record, which the gate counts as valid.
func (s *staleReadGate) loseAndRepublish(t *testing.T, waited int64) {
	t.Helper()
	s.mem.RevokeLease(s.mem.Lease("a"))
	require.NoError(t, versiongatetest.Wait(context.Background(), "a new record published", func() bool {
		rev, valid := versiongate.RecordRevision(s.gate)
		return valid && rev != waited
	}, nil))
	synctest.Wait()
}

// A status read answered while the record WaitReady waited for (revision
// R) stood, and returned only after that record was lost and the next one
// (R') published, is no proof for R': the leader may not have seen R'
// published. WaitReady's record watcher is held before it reads the
// record at all, so rctx has not ended when the read returns: only the
// comparison of the revisions (stillWaited) stands between the stale read
// and a node reported ready. WaitReady returns an error wrapping
// ErrRecordLost, Ready stays false (also at the moment WaitReady has set
// the node ready and not yet checked the record again), and only a new WaitReady's read, made
// while R' stands, makes the node ready.
func TestWaitReadyStaleReadAcrossRepublish(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		s := newStaleReadGate(t, nil)
		ctx := t.Context()
		// What Ready answers at the moment WaitReady has set the node
		// ready and not yet checked the record again: a host polling
		// Ready may ask just then.
		var atReady []bool
		versiongate.SetAfterReady(s.gate, func() { atReady = append(atReady, s.gate.Ready()) })
		res := make(chan error, 1)
		go func() { res <- s.gate.WaitReady(ctx) }()
		synctest.Wait()
		waited, valid := versiongate.RecordRevision(s.gate)
		require.True(t, valid, "WaitReady reads the status only once the record is valid")
		require.EqualValues(t, 1, s.store.reads.Load(), "WaitReady's status read")

		s.loseAndRepublish(t, waited)
		s.releaseRead(t) // the read, answered while R stood, returns
		synctest.Wait()  // WaitReady decided, and waits for its held watcher
		require.False(t, s.gate.Ready(), "ready on record R' by a status read answered while R stood")
		s.releaseWatcher()
		require.ErrorIs(t, receive(t, res, "WaitReady's return"), versiongate.ErrRecordLost)
		require.False(t, s.gate.Ready())
		require.Equal(t, []bool{false}, atReady, "Ready true on record R', for a moment, by a status read answered while R stood")

		go func() { res <- s.gate.WaitReady(ctx) }()
		synctest.Wait()
		require.EqualValues(t, 2, s.store.reads.Load(), "a new WaitReady reads the status again")
		require.False(t, s.gate.Ready(), "ready before a read made while R' stands returned")
		s.releaseRead(t)
		require.NoError(t, receive(t, res, "WaitReady's return"))
		require.True(t, s.gate.Ready())
		require.Equal(t, []bool{false, true}, atReady)
	})
}

// The readiness condition holds to the same rule as WaitReady: with its
// record watcher held, a status read answered while R stood and returned
// after R' was published turns the condition True neither for R nor for
// R'; it turns True once a read made while R' stands admits the node.
func TestConditionStaleReadAcrossRepublish(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		conds := newConditions()
		s := newStaleReadGate(t, conds)
		synctest.Wait()
		waited, valid := versiongate.RecordRevision(s.gate)
		require.True(t, valid, "the condition's status read comes once the record is valid")
		require.EqualValues(t, 1, s.store.reads.Load(), "the condition's status read")
		require.Equal(t, []string{"ReleaseReady False RecordPending"}, conds.list())

		s.loseAndRepublish(t, waited)
		s.releaseRead(t) // the read, answered while R stood, returns
		synctest.Wait()
		require.Equal(t, []string{"ReleaseReady False RecordPending"}, conds.list(),
			"the condition turned True on record R' by a status read answered while R stood")

		s.releaseWatcher()
		synctest.Wait()
		require.EqualValues(t, 2, s.store.reads.Load(), "the status is read again for R'")
		require.Equal(t, []string{"ReleaseReady False RecordPending", "ReleaseReady False RecordLost"}, conds.list(),
			"True before a read made while R' stands returned")
		s.releaseRead(t)
		synctest.Wait()
		require.Equal(t, "ReleaseReady True ReleaseAdmitted", conds.last())
	})
}
