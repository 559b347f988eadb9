package versiongate_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/reconkit/reconkit/versiongate"
	"github.com/reconkit/reconkit/versiongate/versiongatetest"
)

// Loops whose other side answers at once: each test's adversary returns
// immediately (a watch that ends with nil, as after an EOF from a proxy; a
// term that ends as soon as it was used), and the test counts the calls
// per unit of fake time. A loop that does not wait makes the calls with no
// fake time passing.

// eofStore is a store whose watches end at once, with nil and no event,
// and which counts the listings and status reads that follow.
type eofStore struct {
	versiongate.Store
	lists, reads atomic.Int64
}

func (s *eofStore) ListRecords(ctx context.Context) ([]versiongate.Record, int64, error) {
	s.lists.Add(1)
	return s.Store.ListRecords(ctx)
}

func (s *eofStore) WatchRecords(context.Context, int64, func([]versiongate.Record, int64)) error {
	return nil
}

func (s *eofStore) ReadStatus(ctx context.Context) (versiongate.StoredStatus, error) {
	s.reads.Add(1)
	return s.Store.ReadStatus(ctx)
}

func (s *eofStore) WatchStatus(context.Context, int64, func(versiongate.StoredStatus) bool) error {
	return nil
}

// notMember is a host-owned decoder for which no record counts.
func notMember(string, []byte) (versiongate.Release, bool, error) {
	return versiongate.Release{}, false, nil
}

// stepCounting steps clk by step n times, each once something waits on
// it, and checks after each that calls() stayed within perStep calls per
// step (plus the first call).
func stepCounting(t *testing.T, clk *clocktesting.FakeClock, step time.Duration, n int, perStep int64, what string, calls func() int64) {
	t.Helper()
	for i := range n {
		stepWhenWaiting(t, clk, step)
		require.LessOrEqual(t, calls(), 1+perStep*int64(i+1), "%s after %v of fake time", what, step*time.Duration(i+1))
	}
}

// The node watch ends at once, with nil: the gate lists again only after a
// pause that grows while watches deliver nothing.
func TestNodeWatchEndingAtOnceDoesNotSpin(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	st := &eofStore{Store: versiongatetest.NewStore(versiongatetest.StoreConfig{Clock: clk})}
	g, err := versiongate.New(versiongate.Config{
		Store: st, NodeID: "a", Version: ver(t, "1.0.0"), MinimumCompatibleRelease: mustRelease(t, "1.0.0"),
		Decode: notMember, Clock: clk,
		// Never wins: only the node watch runs.
		Candidate: neverWins,
		Reconcile: func(context.Context, versiongate.Term) error { return nil },
	})
	require.NoError(t, err)
	runInBackground(t, g)

	// 100ms, 200ms, 400ms, ...: in 20 steps of 100ms at most 6 listings.
	stepCounting(t, clk, 100*time.Millisecond, 20, 1, "listings", st.lists.Load)
	require.LessOrEqual(t, st.lists.Load(), int64(6), "the pause doubles while watches deliver nothing")
}

// The status watch ends at once, with nil: WaitReady reads the status
// again only after a pause.
func TestStatusWatchEndingAtOnceDoesNotSpin(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	st := &eofStore{Store: versiongatetest.NewStore(versiongatetest.StoreConfig{Clock: clk})}
	g, err := versiongate.New(versiongate.Config{
		Store: st, NodeID: "a", Version: ver(t, "1.0.0"), MinimumCompatibleRelease: mustRelease(t, "1.0.0"),
		Decode: notMember, Clock: clk,
	})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- g.WaitReady(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	stepCounting(t, clk, 100*time.Millisecond, 10, 1, "status reads", st.reads.Load)
}

// The status watch keeps ending at once, for two minutes of fake time:
// WaitReady's pauses grow, with jitter, so that after 30s a node reads at
// most once per 5s (a read and a watch, two requests), whatever the store.
// Seed 1373 draws the pauses for which the fewest reads (6) fall from 30s
// to 120s: the lower bound is held at its edge, not only by chance.
func TestStatusWatchEndingAtOnceBacksOff(t *testing.T) {
	for _, tc := range []struct {
		name string
		rand func() float64
	}{
		{"random", nil},
		{"fewest reads", rand.New(rand.NewPCG(1373, 0)).Float64},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := clocktesting.NewFakeClock(time.Now())
			st := &eofStore{Store: versiongatetest.NewStore(versiongatetest.StoreConfig{Clock: clk})}
			g, err := versiongate.New(versiongate.Config{
				Store: st, NodeID: "a", Version: ver(t, "1.0.0"), MinimumCompatibleRelease: mustRelease(t, "1.0.0"),
				Decode: notMember, Clock: clk, Rand: tc.rand,
			})
			require.NoError(t, err)
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- g.WaitReady(ctx) }()
			t.Cleanup(func() { cancel(); <-done })

			// reads counts the reads once WaitReady waits on the clock
			// again (its only timer): a read that a step's timer set off
			// is then counted in the window of that step, not the next.
			reads := func() int64 {
				require.NoError(t, versiongatetest.Wait(context.Background(), "WaitReady's next pause", clk.HasWaiters, nil))
				return st.reads.Load()
			}
			start := clk.Now()
			var at30 int64
			for clk.Since(start) < 2*time.Minute {
				stepWhenWaiting(t, clk, 100*time.Millisecond)
				if at30 == 0 && clk.Since(start) >= 30*time.Second {
					at30 = reads()
				}
			}
			after := reads() - at30
			t.Logf("%d status reads in the first 30s, %d in the 90s after", at30, after)
			require.LessOrEqual(t, at30, int64(15), "status reads in the first 30s")
			require.LessOrEqual(t, after, int64(90/5+1), "status reads from 30s to 120s")
			require.GreaterOrEqual(t, after, int64(90/15), "status reads from 30s to 120s: it stopped trying")
		})
	}
}

// ver parses a version for the external tests.
func ver(t *testing.T, s string) versiongate.Version {
	t.Helper()
	v, err := versiongate.ParseVersion(s)
	require.NoError(t, err)
	return v
}

// budgetCandidate hands out live terms with rising tokens, at most budget
// of them; later calls wait until their context ends, so a spinning
// caller stops with no fake time passed.
type budgetCandidate struct {
	budget int64
	calls  atomic.Int64
	// nilTerms makes Campaign return no term and no error.
	nilTerms bool
}

func (c *budgetCandidate) Campaign(ctx context.Context) (versiongate.Term, error) {
	n := c.calls.Add(1)
	if n > c.budget {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	if c.nilTerms {
		return nil, nil
	}
	return versiongatetest.NewTerm("a", uint64(n)), nil
}

// A term that ends as soon as its reconcile ran (resigned by the host's
// election, or lost) after the status was done: the gate pauses before it
// campaigns again, as after a failed term.
func TestTermEndingAfterDoneDoesNotSpin(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	store := versiongatetest.NewStore(versiongatetest.StoreConfig{Clock: clk})
	v := ver(t, "1.0.0")
	store.SetStatus(encodeStatus(t, versiongate.Status{State: versiongate.StateDone, Version: v, MinimumCompatibleRelease: v.Release}))
	cand := &budgetCandidate{budget: 50}
	g, err := versiongate.New(versiongate.Config{
		Store: store, NodeID: "a", Version: v, MinimumCompatibleRelease: v.Release,
		Decode: notMember, Clock: clk, SettleTime: -1, Candidate: cand,
		Reconcile: func(ctx context.Context, l versiongate.Term) error {
			// The election ends the term while the leader works.
			return l.Resign(ctx)
		},
	})
	require.NoError(t, err)
	runInBackground(t, g)

	stepCounting(t, clk, 100*time.Millisecond, 10, 2, "campaigns", cand.calls.Load)
}

// A Campaign that returns neither a term nor an error is retried with
// backoff, as a failed one: no panic, no spin.
func TestCampaignReturningNoTermDoesNotSpin(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	store := versiongatetest.NewStore(versiongatetest.StoreConfig{Clock: clk})
	cand := &budgetCandidate{budget: 50, nilTerms: true}
	g, err := versiongate.New(versiongate.Config{
		Store: store, NodeID: "a", Version: ver(t, "1.0.0"), MinimumCompatibleRelease: mustRelease(t, "1.0.0"),
		Decode: notMember, Clock: clk, Candidate: cand,
		Reconcile: func(context.Context, versiongate.Term) error { return nil },
	})
	require.NoError(t, err)
	runInBackground(t, g)

	stepCounting(t, clk, time.Second, 5, 2, "campaigns", cand.calls.Load)
	require.False(t, g.Leading())
}

// zeroTTLStore grants record leases of no time at all: each record is
// lost as soon as it is published.
type zeroTTLStore struct {
	versiongate.Store
	publishes atomic.Int64
}

func (s *zeroTTLStore) PublishRecord(ctx context.Context, id string, value []byte, ttl time.Duration) (versiongate.RecordLease, error) {
	s.publishes.Add(1)
	l, err := s.Store.PublishRecord(ctx, id, value, ttl)
	if err != nil {
		return l, err
	}
	if err := s.Store.DeleteRecord(ctx, l); err != nil {
		return versiongate.RecordLease{}, err
	}
	l.TTL = 0
	return l, nil
}

// With RejoinAfterRecordLoss, a record lost as soon as it is published (a
// lease of 0s) is published again only after a pause on the gate's clock.
func TestRejoinAfterZeroTTLDoesNotSpin(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	st := &zeroTTLStore{Store: versiongatetest.NewStore(versiongatetest.StoreConfig{Clock: clocktesting.NewFakeClock(time.Now())})}
	g, err := versiongate.New(versiongate.Config{
		Store: st, NodeID: "a", Version: ver(t, "1.0.0"), MinimumCompatibleRelease: mustRelease(t, "1.0.0"),
		Clock: clk, RecordClock: clocktesting.NewFakeClock(time.Now()), RecordTTL: time.Second, RejoinAfterRecordLoss: true,
		Candidate: neverWins,
		Reconcile: func(context.Context, versiongate.Term) error { return nil },
	})
	require.NoError(t, err)
	runInBackground(t, g)

	stepCounting(t, clk, 100*time.Millisecond, 10, 1, "record publications", st.publishes.Load)
}

// neverWins is a Candidate whose Campaign waits until its context ends,
// so only the gate's other loops run.
var neverWins = versiongate.CandidateFunc(func(ctx context.Context) (versiongate.Term, error) {
	<-ctx.Done()
	return nil, ctx.Err()
})

// runInBackground runs g until the test ends, and waits for Run to return.
func runInBackground(t *testing.T, g *versiongate.Gate) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = g.Run(ctx) }()
	t.Cleanup(func() { cancel(); wg.Wait() })
}

// starvedTimers is a clock whose timers never fire, as for a goroutine
// that a starved process does not run: Now moves on, the keep-alive loop
// does not.
type starvedTimers struct{ *clocktesting.FakeClock }

func (starvedTimers) NewTimer(time.Duration) clock.Timer {
	return clocktesting.NewFakeClock(time.Time{}).NewTimer(time.Hour)
}

// Ready judges the record's local deadline when asked: a gate whose
// keep-alive loop never runs again (its timers never fire) is ready until
// the deadline and not a moment after, although nothing marked the record
// lost.
func TestReadyFalseAtTheDeadlineWhenTheKeepAliveLoopRunsLate(t *testing.T) {
	rec := starvedTimers{clocktesting.NewFakeClock(time.Now())}
	st := versiongatetest.NewStore(versiongatetest.StoreConfig{})
	st.SetStatus(encodeStatus(t, versiongate.Status{State: versiongate.StateDone,
		Version: versiongate.Version{Release: mustRelease(t, "1.0.0")}, MinimumCompatibleRelease: mustRelease(t, "1.0.0")}))
	g, err := versiongate.New(versiongate.Config{
		Store: st, NodeID: "a", Version: ver(t, "1.0.0"), MinimumCompatibleRelease: mustRelease(t, "1.0.0"),
		RecordClock: rec, RecordTTL: 10 * time.Second, Candidate: neverWins,
		Reconcile: func(context.Context, versiongate.Term) error { return nil },
	})
	require.NoError(t, err)
	runInBackground(t, g)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	require.NoError(t, g.WaitReady(ctx))
	require.True(t, g.Ready())
	// The deadline is the publish's start plus the TTL less the margin
	// (1s): 9s on the record clock.
	rec.Step(8900 * time.Millisecond)
	require.True(t, g.Ready(), "ready before the deadline")
	rec.Step(200 * time.Millisecond)
	require.False(t, g.Ready(), "ready past the record's deadline")
}

// failingRestrictStore fails every status write conditioned on the
// records (the leader's restrict) with a transient error, and counts them.
type failingRestrictStore struct {
	versiongate.Store
	conditioned atomic.Int64
}

func (s *failingRestrictStore) WriteStatus(ctx context.Context, t versiongate.Term, value []byte, nodesRev int64) error {
	if nodesRev > 0 {
		s.conditioned.Add(1)
		return errors.New("test: 503 from the server")
	}
	return s.Store.WriteStatus(ctx, t, value, nodesRev)
}

// The leader's restricted status write fails for two minutes of fake time
// with a transient error: it retries with pauses that grow, with jitter,
// so that after 30s it writes at most once per 5s.
func TestRestrictWriteFailingBacksOff(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	mem := versiongatetest.NewStore(versiongatetest.StoreConfig{Clock: clk})
	ctx := context.Background()
	old := versiongatetest.NewTerm("old", 1)
	require.NoError(t, mem.Fence(ctx, old))
	b, err := versiongate.Status{State: versiongate.StateDone, Version: ver(t, "1.0.0"), MinimumCompatibleRelease: mustRelease(t, "1.0.0")}.Encode()
	require.NoError(t, err)
	require.NoError(t, mem.WriteStatus(ctx, old, b, 0))
	st := &failingRestrictStore{Store: mem}
	g, err := versiongate.New(versiongate.Config{
		Store: st, NodeID: "a", Version: ver(t, "2.0.0"), MinimumCompatibleRelease: mustRelease(t, "2.0.0"),
		Decode: notMember, Clock: clk, SettleTime: -1,
		Candidate: &budgetCandidate{budget: 1},
		Reconcile: func(context.Context, versiongate.Term) error { return nil },
	})
	require.NoError(t, err)
	runInBackground(t, g)

	start := clk.Now()
	var at30 int64
	for clk.Since(start) < 2*time.Minute {
		stepWhenWaiting(t, clk, 100*time.Millisecond)
		if at30 == 0 && clk.Since(start) >= 30*time.Second {
			at30 = st.conditioned.Load()
		}
	}
	after := st.conditioned.Load() - at30
	t.Logf("%d restricted writes in the first 30s, %d in the 90s after", at30, after)
	require.Positive(t, at30, "the leader never tried to restrict")
	require.LessOrEqual(t, at30, int64(15), "restricted writes in the first 30s")
	require.LessOrEqual(t, after, int64(90/5+1), "restricted writes from 30s to 120s")
}
