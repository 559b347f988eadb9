package storecheck

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/reconkit/reconkit/versiongate"
)

// Backend is a store under test as the drivers use it: a fresh, empty
// store per driver run, reached by every node through its own connection.
// A new store plugs in by filling these fields.
type Backend struct {
	// Connect returns the node's own connection to the store and to the
	// election the test chose; it is called at every start of the node.
	// Required.
	Connect func(t testing.TB, node string) Conn
	// Observer is a connection no partition cuts, for the drivers'
	// checks. Required.
	Observer versiongate.Store
	// Partition cuts (true) or heals (false) every connection of the
	// node, store and election alike. Nil: no partitions.
	Partition func(node string, cut bool)
	// RestartServer stops the store's server and starts it again,
	// returning once it serves. Nil: no restarts.
	RestartServer func(t testing.TB)
	// Guarded is passed to NewRecorder.
	Guarded func(versiongate.Term) bool
	// ValidatedAfterWrite passes the option of that name to NewRecorder:
	// the store validates a conditioned status write after applying it.
	ValidatedAfterWrite bool
	// LostRecordsLinger passes the option of that name to NewRecorder: a
	// keep-alive may report a record lost before it is deleted.
	LostRecordsLinger bool
	// WatchTooOld passes the option of that name to NewRecorder: it tells
	// the errors that end a watch because its revision is no longer
	// watchable. Nil: watch ends are not checked.
	WatchTooOld func(error) bool
	// WatchWindow passes the option of that name to NewRecorder: the
	// store's watch history is a window that moves on by itself.
	WatchWindow bool
	// WatchWindowKept is how much history that window keeps at least
	// (see WatchWindow); zero means DefaultWatchWindow, the apiserver's.
	WatchWindowKept time.Duration
}

// recorder returns a Recorder for a run on b.
func (b Backend) recorder() *Recorder {
	var opts []RecorderOption
	if b.ValidatedAfterWrite {
		opts = append(opts, ValidatedAfterWrite())
	}
	if b.LostRecordsLinger {
		opts = append(opts, LostRecordsLinger())
	}
	if b.WatchTooOld != nil {
		opts = append(opts, WatchTooOld(b.WatchTooOld))
	}
	if b.WatchWindow {
		kept := b.WatchWindowKept
		if kept == 0 {
			kept = DefaultWatchWindow
		}
		opts = append(opts, WatchWindow(kept))
	}
	return NewRecorder(b.Guarded, opts...)
}

// Conn is one node's connection, for one run of its gate.
type Conn struct {
	// Store is the node's store.
	Store versiongate.Store
	// Candidate is the node's candidate on the election.
	Candidate versiongate.Candidate
	// Close ends the connection. With crash true it is called before the
	// node's gate is stopped, as a process dying: nothing it sends later
	// may reach the server, whose leases then expire on their own. With
	// crash false it is called after the gate returned. Nil: nothing to do.
	Close func(crash bool)
}

func (c Conn) close(crash bool) {
	if c.Close != nil {
		c.Close(crash)
	}
}

// noCandidate never wins: for nodes that must not lead.
var noCandidate = versiongate.CandidateFunc(func(ctx context.Context) (versiongate.Term, error) {
	<-ctx.Done()
	return nil, ctx.Err()
})

func noReconcile(context.Context, versiongate.Term) error { return nil }

// readiness follows a gate's condition reports: changed returns a channel
// closed at the next report.
type readiness struct {
	mu sync.Mutex
	ch chan struct{}
}

func newReadiness() *readiness { return &readiness{ch: make(chan struct{})} }

// ReportCondition implements versiongate.ConditionReporter.
func (r *readiness) ReportCondition(string, string, string, string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	close(r.ch)
	r.ch = make(chan struct{})
}

func (r *readiness) changed() <-chan struct{} {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ch
}

// waitNotReady blocks until g stops being ready or ctx ends. The gate
// reports every change of readiness; the ticker only guards against a
// report missed between the check and the wait.
func waitNotReady(ctx context.Context, g *versiongate.Gate, r *readiness) {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		ch := r.changed()
		if !g.Ready() {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-ch:
		case <-tick.C:
		}
	}
}
