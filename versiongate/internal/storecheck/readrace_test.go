package storecheck

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconkit/reconkit/versiongate"
	"github.com/reconkit/reconkit/versiongate/versiongatetest"
)

// heldRead answers an armed status read and then holds the answer,
// whatever the read's context says, until released: a read the server
// answered while one record stood, returned to a goroutine that runs
// only after the next one was published (a starved process).
type heldRead struct {
	versiongate.Store
	armed   atomic.Bool
	reading chan struct{} // closed once the armed read has its answer
	release chan struct{}
}

func (h *heldRead) ReadStatus(ctx context.Context) (versiongate.StoredStatus, error) {
	st, err := h.Store.ReadStatus(ctx)
	if h.armed.CompareAndSwap(true, false) {
		close(h.reading)
		<-h.release
	}
	return st, err
}

// WaitReady reads the status after the record it waited for was
// published; a read answered while that record stood is no proof for the
// next one, which a leader that restricted in between never saw: the
// node lost its record, a leader that counted it gone could restrict, and
// the node published again. So WaitReady fails with ErrRecordLost when
// the record it waited on was lost before the read returned, even when a
// new record is valid by then, and the node is not ready.
func TestWaitReadyNotOnAReadOlderThanItsRecord(t *testing.T) {
	h := startHeldRead(t, nil)
	g, rctx := h.g, h.ctx
	waitc := make(chan error, 1)
	go func() { waitc <- g.WaitReady(rctx) }()

	h.loseRecordDuringRead(t, "WaitReady")
	select {
	case err := <-waitc:
		require.ErrorIs(t, err, versiongate.ErrRecordLost)
	case <-time.After(10 * time.Second):
		t.Fatal("WaitReady did not return")
	}
	require.False(t, g.Ready(), "ready on a status read before its record was published")
	// A new wait reads the status again, after the new record: ready.
	require.NoError(t, g.WaitReady(rctx))
	require.True(t, g.Ready())
}

// The readiness condition holds to WaitReady's rule: a status read
// answered while the record it waited on stood, and returned after that
// record was lost and the next one published, never reports True; the
// condition goes False with ReasonRecordLost, and True only on a read made
// after the new record.
func TestReadinessConditionNotOnAReadOlderThanItsRecord(t *testing.T) {
	type report struct{ status, reason string }
	reports := make(chan report, 100)
	h := startHeldRead(t, versiongate.ConditionReporterFunc(func(_, status, reason, _ string) {
		reports <- report{status, reason}
	}))
	h.loseRecordDuringRead(t, "the readiness condition")
	deadline := time.After(10 * time.Second)
	sawLost := false
	for {
		select {
		case r := <-reports:
			if r.status == versiongate.ConditionTrue {
				require.True(t, sawLost, "True reported on a status read before the record was lost")
				return // True on a read after the new record
			}
			if r.reason == versiongate.ReasonRecordLost {
				sawLost = true
			}
		case <-deadline:
			t.Fatalf("the condition was not True again on a read after the new record (record loss reported: %v)", sawLost)
		}
	}
}

// heldReadGate is a gate whose first status read is held (heldRead) on a
// memory store with a status that admits it.
type heldReadGate struct {
	s         *versiongatetest.Store
	hr        *heldRead
	g         *versiongate.Gate
	ctx       context.Context // Run's
	keptAlive atomic.Int64    // keep-alives since the first record loss
}

// startHeldRead runs such a gate, reporting its condition to conditions
// if not nil, until the test ends.
func startHeldRead(t *testing.T, conditions versiongate.ConditionReporter) *heldReadGate {
	t.Helper()
	ctx := t.Context()
	done10, _, _ := rollingStatuses(t)
	h := &heldReadGate{s: versiongatetest.NewStore(versiongatetest.StoreConfig{})}
	term := versiongatetest.NewTerm("seed", 1)
	require.NoError(t, h.s.Fence(ctx, term))
	require.NoError(t, h.s.WriteStatus(ctx, term, []byte(done10), 0))
	h.hr = &heldRead{Store: h.s.Conn(), reading: make(chan struct{}), release: make(chan struct{})}
	h.hr.armed.Store(true)
	var lost atomic.Int64
	g, err := versiongate.New(versiongate.Config{
		Store: h.hr, NodeID: "node-4", Version: versiongate.Version{Release: rel(1, 0)},
		MinimumReconcilerRelease: rel(1, 0), MinimumCompatibleRelease: rel(1, 0),
		RecordTTL: 2 * time.Second, Candidate: noCandidate, Reconcile: noReconcile,
		RejoinAfterRecordLoss: true, Conditions: conditions,
		Metrics: versiongate.MetricsFunc(func(o versiongate.Observation) {
			switch o.Event {
			case versiongate.EventRecordLost:
				lost.Add(1)
			case versiongate.EventKeepAlive:
				if lost.Load() > 0 {
					h.keptAlive.Add(1)
				}
			}
		}),
	})
	require.NoError(t, err)
	h.g = g
	rctx, cancel := context.WithCancel(ctx)
	h.ctx = rctx
	runDone := make(chan struct{})
	go func() { defer close(runDone); _ = g.Run(rctx) }()
	t.Cleanup(func() { cancel(); <-runDone })
	return h
}

// loseRecordDuringRead waits until reader's status read is held, loses
// the record it waited on, waits until the gate published a new one and
// keeps it alive, and then lets the old read return.
func (h *heldReadGate) loseRecordDuringRead(t *testing.T, reader string) {
	t.Helper()
	select {
	case <-h.hr.reading:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s never read the status", reader)
	}
	first := h.s.Lease("node-4")
	require.NotZero(t, first)
	h.s.RevokeLease(first) // the record is gone: a leader may restrict now
	// The gate notices at its next keep-alive, publishes a new record
	// and keeps that alive.
	require.Eventually(t, func() bool { return h.keptAlive.Load() > 0 }, 10*time.Second, 5*time.Millisecond)
	require.NotEqual(t, first, h.s.Lease("node-4"), "a new record")
	close(h.hr.release) // the read, answered while the first record stood, returns
}
