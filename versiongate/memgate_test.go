package versiongate_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/reconkit/reconkit/election"
	"github.com/reconkit/reconkit/election/electiontest"
	"github.com/reconkit/reconkit/versiongate"
	"github.com/reconkit/reconkit/versiongate/versiongatetest"
)

// Tests of the gate without a server: the in-memory store and the
// in-memory election. Paths that cross the wire are tested on etcd in the
// other files.

// Any election.Elector is a Candidate as it is, and a term of any reconkit
// elector is a Term: no adapter.
var (
	_ versiongate.Candidate = election.Elector(nil)
	_ versiongate.Candidate = (*electiontest.Candidate)(nil)
	_ versiongate.Term      = election.Leadership(nil)
	// The gate's leader work has election.Run's callback type.
	_ func(context.Context, election.Leadership) error = versiongate.ReconcileFunc(nil)
)

// recorder collects a gate's observations and events.
type recorder struct {
	mu     sync.Mutex
	obs    []versiongate.Observation
	events []string
	tokens []uint64
}

func (r *recorder) Observe(o versiongate.Observation) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.obs = append(r.obs, o)
}

func (r *recorder) Event(eventtype, reason, message string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, eventtype+" "+reason)
}

func (r *recorder) reconcile(_ context.Context, l versiongate.Term) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.tokens = append(r.tokens, l.Token())
	return nil
}

func (r *recorder) reconciled() []uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.tokens)
}

func (r *recorder) eventList() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events)
}

func (r *recorder) observations(ev versiongate.Event) []versiongate.Observation {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []versiongate.Observation
	for _, o := range r.obs {
		if o.Event == ev {
			out = append(out, o)
		}
	}
	return out
}

// memNode is one gate on the shared in-memory store and election.
type memNode struct {
	gate *versiongate.Gate
	conn *versiongatetest.Conn
	cand *electiontest.Candidate
	rec  *recorder
	errc chan error
	stop func()
}

// memCluster is a store and an election that gates share. Three fake
// clocks, so that a test steps each only when what it waits for is armed:
// the gates' waits (settle, backoff), their records' keep-alives, and the
// store's lease expiry.
type memCluster struct {
	t          *testing.T
	store      *versiongatetest.Store
	el         *electiontest.Election
	clock      *clocktesting.FakeClock
	recClock   *clocktesting.FakeClock
	storeClock *clocktesting.FakeClock
}

func newMemCluster(t *testing.T) *memCluster {
	now := time.Now()
	sc := clocktesting.NewFakeClock(now)
	return &memCluster{t: t, store: versiongatetest.NewStore(versiongatetest.StoreConfig{Clock: sc}),
		el: electiontest.NewElection(), clock: clocktesting.NewFakeClock(now),
		recClock: clocktesting.NewFakeClock(now), storeClock: sc}
}

// stepWhenWaiting steps clk by d once something waits on it.
func stepWhenWaiting(t *testing.T, clk *clocktesting.FakeClock, d time.Duration) {
	t.Helper()
	require.NoError(t, versiongatetest.Wait(context.Background(), "a waiter on the fake clock", clk.HasWaiters, nil))
	clk.Step(d)
}

// stepUntil steps clk by d, whenever something waits on it, until cond
// holds, and fails the test if it does not within
// versiongatetest.DefaultWait of real time. A fixed number of steps is
// not enough: a FakeClock keeps the waiters of After calls whose select
// has moved on, so HasWaiters can hold while the goroutine the steps must
// drive has not yet armed its own timer, and on a loaded machine every
// step of a fixed count can land before it does.
func stepUntil(t *testing.T, clk *clocktesting.FakeClock, d time.Duration, what string, cond func() bool) {
	t.Helper()
	require.NoError(t, versiongatetest.Wait(context.Background(), what, func() bool {
		if cond() {
			return true
		}
		if clk.HasWaiters() {
			clk.Step(d)
		}
		return false
	}, nil))
}

// stepRecord lets d pass for the records: for the store's leases, then
// for the keep-alives, once the keep-alive timer is armed. The store's
// clock goes first: a keep-alive the step sets off must renew the lease at
// the store's new time, not at the old one (the other order let the
// keep-alive loop run before the store's clock moved, and the lease then
// expired a step early).
func (c *memCluster) stepRecord(d time.Duration) {
	c.storeClock.Step(d)
	stepWhenWaiting(c.t, c.recClock, d)
}

func (c *memCluster) node(id, version, minCompat string, settle time.Duration, opts ...func(*versiongate.Config)) *memNode {
	t := c.t
	v, err := versiongate.ParseVersion(version)
	require.NoError(t, err)
	mc, err := versiongate.ParseRelease(minCompat)
	require.NoError(t, err)
	n := &memNode{conn: c.store.Conn(), cand: c.el.NewCandidate(id), rec: &recorder{}}
	cfg := versiongate.Config{
		Store: n.conn, NodeID: id, Version: v, MinimumCompatibleRelease: mc,
		Candidate: n.cand, Reconcile: n.rec.reconcile, SettleTime: settle,
		Clock: c.clock, RecordClock: c.recClock, Metrics: n.rec, Events: n.rec,
	}
	for _, o := range opts {
		o(&cfg)
	}
	n.gate, err = versiongate.New(cfg)
	require.NoError(t, err)
	return n
}

func (n *memNode) run(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	n.errc = make(chan error, 1)
	go func() { n.errc <- n.gate.Run(ctx) }()
	var once sync.Once
	n.stop = func() { once.Do(cancel) }
	t.Cleanup(func() {
		n.stop()
		select {
		case <-n.errc:
		case <-time.After(versiongatetest.DefaultWait):
			t.Error("Run did not return after its context ended")
		}
	})
}

// runErr waits for Run's result.
func (n *memNode) runErr(t *testing.T) error {
	t.Helper()
	select {
	case err := <-n.errc:
		n.errc <- err // for the cleanup
		return err
	case <-time.After(versiongatetest.DefaultWait):
		t.Fatal("Run did not return")
		return nil
	}
}

func encodeStatus(t *testing.T, st versiongate.Status) []byte {
	t.Helper()
	b, err := st.Encode()
	require.NoError(t, err)
	return b
}

func storedStatus(t *testing.T, s *versiongatetest.Store) versiongate.Status {
	t.Helper()
	b, ok := s.Status()
	require.True(t, ok, "no status")
	st, err := versiongate.DecodeStatus(b)
	require.NoError(t, err)
	return st
}

func mustRelease(t *testing.T, s string) versiongate.Release {
	t.Helper()
	r, err := versiongate.ParseRelease(s)
	require.NoError(t, err)
	return r
}

// The gate runs on the in-memory store with the in-memory election: the
// leader reconciles with its term, writes DONE, both nodes pass WaitReady;
// when the leader's term is lost the other node takes over with a higher
// token, which the store's fence now holds. Run returns nil when its
// context ends.
func TestGateOnMemoryStoreAndFakeElection(t *testing.T) {
	c := newMemCluster(t)
	ctx := context.Background()
	a := c.node("a", "1.0.0", "1.0.0", -1)
	b := c.node("b", "1.0.0", "1.0.0", -1)
	a.run(t)
	require.NoError(t, versiongatetest.WaitPhase(ctx, a.gate, versiongate.PhaseDone))
	b.run(t)
	require.NoError(t, versiongatetest.WaitNodes(ctx, b.gate, 2))
	require.NoError(t, a.gate.WaitReady(ctx))
	require.NoError(t, b.gate.WaitReady(ctx))
	require.Equal(t, []uint64{1}, a.rec.reconciled(), "the reconcile receives the term")
	require.Equal(t, versiongate.Status{State: versiongate.StateDone, Version: versiongate.Version{Release: mustRelease(t, "1.0.0")},
		MinimumCompatibleRelease: mustRelease(t, "1.0.0")}, storedStatus(t, c.store))

	require.True(t, a.cand.Kill(), "a leads")
	require.NoError(t, versiongatetest.WaitPhase(ctx, b.gate, versiongate.PhaseDone))
	require.Equal(t, []uint64{2}, b.rec.reconciled())
	require.Equal(t, uint64(2), c.store.FenceToken())

	a.stop()
	require.NoError(t, a.runErr(t), "Run returns nil when its context ends")
	require.False(t, a.gate.Ready())
}

// A deposed leader whose own term context is still live cannot write the
// status: the store refuses its write at apply time because a later term
// fenced it. The status is left as it was.
func TestDeposedLeaderWriteRefusedAtApplyTime(t *testing.T) {
	c := newMemCluster(t)
	ctx := context.Background()
	before := versiongate.Status{State: versiongate.StateDone, Version: versiongate.Version{Release: mustRelease(t, "1.0.0")},
		MinimumCompatibleRelease: mustRelease(t, "1.0.0")}
	c.store.SetStatus(encodeStatus(t, before))
	old, err := versiongate.EncodeNodeRelease("old", versiongate.Version{Release: mustRelease(t, "1.0.0")})
	require.NoError(t, err)
	c.store.PutRecord("old", old)

	n := c.node("new", "2.0.0", "2.0.0", -1)
	n.run(t)
	require.NoError(t, versiongatetest.WaitPhase(ctx, n.gate, versiongate.PhaseRestricting))
	require.NoError(t, versiongatetest.WaitBlocking(ctx, n.gate, "old"))

	// A successor's term fences the store; the election has not told
	// this leader (its term context is live).
	require.NoError(t, c.store.Fence(ctx, versiongatetest.NewTerm("successor", 100)))
	require.True(t, n.gate.Leading())

	c.store.RemoveRecord("old") // the restricted status may now be written
	require.NoError(t, versiongatetest.WaitLeading(ctx, n.gate, false))
	require.Equal(t, 0, n.conn.StatusWrites(), "the deposed leader wrote the status")
	require.Equal(t, before, storedStatus(t, c.store))
	require.Empty(t, n.rec.reconciled(), "the deposed leader reconciled")
}

// A node whose keep-alives are lost stops serving at its record's local
// deadline, before the store expires the record, and reports it through
// Run, Ready, the metrics hook and an event.
func TestRecordLostBeforeStoreExpiresIt(t *testing.T) {
	c := newMemCluster(t)
	ctx := context.Background()
	c.store.SetStatus(encodeStatus(t, versiongate.Status{State: versiongate.StateDone,
		Version: versiongate.Version{Release: mustRelease(t, "1.0.0")}, MinimumCompatibleRelease: mustRelease(t, "1.0.0")}))
	n := c.node("n1", "1.0.0", "1.0.0", -1)
	n.run(t)
	require.NoError(t, n.gate.WaitReady(ctx))
	require.True(t, n.gate.Ready())

	// One renewal goes through and is observed.
	c.stepRecord(versiongate.DefaultRecordTTL / 3)
	require.NoError(t, versiongatetest.Wait(ctx, "a keep-alive observation", func() bool {
		return len(n.rec.observations(versiongate.EventKeepAlive)) > 0
	}, nil))
	ka := n.rec.observations(versiongate.EventKeepAlive)[0]
	require.Equal(t, "n1", ka.NodeID)
	require.Positive(t, ka.ValidFor)
	require.LessOrEqual(t, ka.ValidFor, versiongate.DefaultRecordTTL)

	// Then the keep-alives are lost. The local deadline (TTL less a
	// margin of at least 500ms) passes before the store's expiry.
	n.conn.DropKeepAlives(true)
	c.stepRecord(versiongate.DefaultRecordTTL - 500*time.Millisecond)
	require.ErrorIs(t, n.runErr(t), versiongate.ErrRecordLost)
	require.False(t, n.gate.Ready())
	require.Contains(t, c.store.Records(), "n1", "the store expired the record before the node stopped serving")
	require.Len(t, n.rec.observations(versiongate.EventRecordLost), 1)
	require.ErrorIs(t, n.rec.observations(versiongate.EventRecordLost)[0].Err, versiongate.ErrRecordLost)
	require.Contains(t, n.rec.eventList(), "Warning RecordLost")

	c.storeClock.Step(time.Second)
	require.NoError(t, versiongatetest.Wait(ctx, "the store to expire the record", func() bool {
		return !slices.Contains(c.store.Records(), "n1")
	}, nil))
}

// The metrics hook and the event recorder see the phases, the blocking
// nodes, the restrict and done transitions with the term's token.
func TestMetricsAndEvents(t *testing.T) {
	c := newMemCluster(t)
	ctx := context.Background()
	c.store.SetStatus(encodeStatus(t, versiongate.Status{State: versiongate.StateDone,
		Version: versiongate.Version{Release: mustRelease(t, "1.0.0")}, MinimumCompatibleRelease: mustRelease(t, "1.0.0")}))
	old, err := versiongate.EncodeNodeRelease("old", versiongate.Version{Release: mustRelease(t, "1.0.0")})
	require.NoError(t, err)
	c.store.PutRecord("old", old)
	n := c.node("new", "2.0.0", "2.0.0", time.Second)
	n.run(t)
	require.NoError(t, versiongatetest.WaitPhase(ctx, n.gate, versiongate.PhaseRestricting))
	require.NoError(t, versiongatetest.WaitBlocking(ctx, n.gate, "old"))
	c.store.RemoveRecord("old")
	require.NoError(t, versiongatetest.WaitPhase(ctx, n.gate, versiongate.PhaseSettling))
	stepWhenWaiting(t, c.clock, time.Second)
	require.NoError(t, versiongatetest.WaitPhase(ctx, n.gate, versiongate.PhaseDone))
	// A phase is stored before it is observed: a poll of Phase can see
	// it first.
	require.NoError(t, versiongatetest.Wait(ctx, "the Done phase observed", func() bool {
		return slices.ContainsFunc(n.rec.observations(versiongate.EventPhase), func(o versiongate.Observation) bool {
			return o.Phase == versiongate.PhaseDone
		})
	}, nil))

	var phases []versiongate.Phase
	for _, o := range n.rec.observations(versiongate.EventPhase) {
		require.Equal(t, "new", o.NodeID)
		phases = append(phases, o.Phase)
	}
	require.Equal(t, []versiongate.Phase{versiongate.PhaseCampaigning, versiongate.PhaseRestricting,
		versiongate.PhaseSettling, versiongate.PhaseReconciling, versiongate.PhaseDone}, phases)
	var blocking []int
	for _, o := range n.rec.observations(versiongate.EventBlocking) {
		blocking = append(blocking, o.Blocking)
	}
	require.Equal(t, []int{1, 0}, blocking)
	restrict := n.rec.observations(versiongate.EventRestrict)
	require.Len(t, restrict, 1)
	require.Equal(t, uint64(1), restrict[0].Token)
	done := n.rec.observations(versiongate.EventDone)
	require.Len(t, done, 1)
	require.Equal(t, uint64(1), done[0].Token)
	require.Equal(t, []string{"Normal Restricting", "Normal Restricted", "Normal UpgradeDone"}, n.rec.eventList())
	// A host that sees PhaseDone has been told of it already: the Done
	// observation comes before the phase's.
	n.rec.mu.Lock()
	order := slices.IndexFunc(n.rec.obs, func(o versiongate.Observation) bool { return o.Event == versiongate.EventDone }) <
		slices.IndexFunc(n.rec.obs, func(o versiongate.Observation) bool {
			return o.Event == versiongate.EventPhase && o.Phase == versiongate.PhaseDone
		})
	n.rec.mu.Unlock()
	require.True(t, order, "EventDone observed after the phase changed to Done")
}

// LeadingChanged is closed when the gate starts leading and again when it
// stops; Leading reads the new state.
func TestLeadingChanged(t *testing.T) {
	c := newMemCluster(t)
	n := c.node("a", "1.0.0", "1.0.0", -1)
	changed := n.gate.LeadingChanged()
	require.False(t, n.gate.Leading())
	n.run(t)
	waitClosed(t, changed, "LeadingChanged when the gate starts leading")
	require.True(t, n.gate.Leading())

	changed = n.gate.LeadingChanged()
	select {
	case <-changed:
		t.Fatal("LeadingChanged closed without a change")
	default:
	}
	// Killed only once the initial reconcile is done: a term that fails
	// before that pauses on the gate's fake clock before campaigning again.
	require.NoError(t, versiongatetest.WaitPhase(context.Background(), n.gate, versiongate.PhaseDone))
	require.True(t, n.cand.Kill())
	waitClosed(t, changed, "LeadingChanged when the term is lost")
	// The gate pauses on its clock, campaigns again and, alone, wins at
	// once: it may already lead anew, but it passed through not leading.
	stepUntil(t, c.clock, time.Second, "a second term's reconcile", func() bool { return len(n.rec.reconciled()) >= 2 })
	require.Equal(t, []uint64{1, 2}, n.rec.reconciled())
	require.NoError(t, versiongatetest.WaitLeading(context.Background(), n.gate, true))
}

func waitClosed(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(versiongatetest.DefaultWait):
		t.Fatalf("waiting for %s: not closed within %v", what, versiongatetest.DefaultWait)
	}
}

// PhaseChanged is closed at every phase change, so a host follows the
// phase without polling.
func TestPhaseChanged(t *testing.T) {
	c := newMemCluster(t)
	n := c.node("a", "1.0.0", "1.0.0", -1)
	seen := []versiongate.Phase{n.gate.Phase()}
	changed := n.gate.PhaseChanged()
	n.run(t)
	for seen[len(seen)-1] != versiongate.PhaseDone {
		waitClosed(t, changed, fmt.Sprintf("a phase change after %v", seen))
		changed = n.gate.PhaseChanged()
		if p := n.gate.Phase(); p != seen[len(seen)-1] {
			seen = append(seen, p)
		}
	}
	require.Equal(t, versiongate.PhaseIdle, seen[0])
}

// Under watch lag the leader's view of the nodes is stale: a node joined
// that its summary does not show. The restricted status, conditioned on
// the summary's revision, is refused, and written only once the leader has
// seen the node and it has gone.
func TestRestrictUnderWatchLag(t *testing.T) {
	c := newMemCluster(t)
	ctx := context.Background()
	before := versiongate.Status{State: versiongate.StateDone, Version: versiongate.Version{Release: mustRelease(t, "1.0.0")},
		MinimumCompatibleRelease: mustRelease(t, "1.0.0")}
	c.store.SetStatus(encodeStatus(t, before))
	old, err := versiongate.EncodeNodeRelease("old", versiongate.Version{Release: mustRelease(t, "1.0.0")})
	require.NoError(t, err)
	late, err := versiongate.EncodeNodeRelease("late", versiongate.Version{Release: mustRelease(t, "1.0.0")})
	require.NoError(t, err)
	c.store.PutRecord("old", old)

	n := c.node("new", "2.0.0", "2.0.0", -1)
	n.run(t)
	require.NoError(t, versiongatetest.WaitBlocking(ctx, n.gate, "old"))

	// Hold the leader's write back with a transient error while the old
	// node goes; then a late node joins behind a lagging watch.
	n.conn.FailWrites(errors.New("transient"))
	c.store.RemoveRecord("old")
	require.NoError(t, versiongatetest.Wait(ctx, "the leader's write to be held back", c.clock.HasWaiters, nil))
	c.store.PauseWatches()
	c.store.PutRecord("late", late)
	n.conn.FailWrites(nil)
	c.clock.Step(time.Second)
	require.NoError(t, versiongatetest.Wait(ctx, "the stale write to be refused", func() bool { return n.conn.RefusedWrites() > 0 }, nil))
	require.Equal(t, before, storedStatus(t, c.store), "restricted past a node the leader had not seen")
	require.Empty(t, n.gate.Blocking(), "the leader saw the late node through a paused watch")

	c.store.ResumeWatches()
	require.NoError(t, versiongatetest.WaitBlocking(ctx, n.gate, "late"))
	require.Equal(t, before, storedStatus(t, c.store))
	c.store.RemoveRecord("late")
	require.NoError(t, versiongatetest.WaitPhase(ctx, n.gate, versiongate.PhaseDone))
	require.Equal(t, mustRelease(t, "2.0.0"), storedStatus(t, c.store).MinimumCompatibleRelease)
}
