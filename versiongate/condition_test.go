package versiongate_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/reconkit/reconkit/versiongate"
	"github.com/reconkit/reconkit/versiongate/versiongatetest"
)

// conditions records the conditions a gate reports, in order.
type conditions struct {
	mu      sync.Mutex
	got     []string // "type status reason"
	changed chan struct{}
	block   chan struct{} // if not nil, each report waits until it is closed
}

func newConditions() *conditions { return &conditions{changed: make(chan struct{})} }

func (c *conditions) ReportCondition(conditionType, status, reason, message string) {
	if c.block != nil {
		<-c.block
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.got = append(c.got, conditionType+" "+status+" "+reason)
	close(c.changed)
	c.changed = make(chan struct{})
}

func (c *conditions) list() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.got)
}

func (c *conditions) last() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.got) == 0 {
		return ""
	}
	return c.got[len(c.got)-1]
}

func (c *conditions) ch() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.changed
}

// wait blocks until the last reported condition is want.
func (c *conditions) wait(t *testing.T, want string) {
	t.Helper()
	require.NoError(t, versiongatetest.Wait(context.Background(), fmt.Sprintf("condition %q (reported: %q)", want, c.list()),
		func() bool { return c.last() == want }, c.ch))
}

// pump steps clk by step whenever something waits on it, until stop is
// called.
func pump(clk *clocktesting.FakeClock, step time.Duration) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			if versiongatetest.Wait(ctx, "a waiter", clk.HasWaiters, nil) == nil {
				clk.Step(step)
			}
		}
	}()
	return func() { cancel(); <-done }
}

func doneStatus(t *testing.T, version, minCompat string) []byte {
	return encodeStatus(t, versiongate.Status{State: versiongate.StateDone,
		Version: versiongate.Version{Release: mustRelease(t, version)}, MinimumCompatibleRelease: mustRelease(t, minCompat)})
}

// The condition says whether WaitReady would return now: False while
// there is no status, True once the status admits the release, False
// with RecordLost the moment the record's local deadline passes, reported
// before Run returns; each change once.
func TestConditionFollowsReadiness(t *testing.T) {
	c := newMemCluster(t)
	ctx := context.Background()
	// A newer node keeps this one from campaigning, so the status stays
	// absent until the test writes it.
	newer, err := versiongate.EncodeNodeRelease("newer", versiongate.Version{Release: mustRelease(t, "2.0.0")})
	require.NoError(t, err)
	c.store.PutRecord("newer", newer)

	conds := newConditions()
	n := c.node("n1", "1.0.0", "1.0.0", -1, func(cfg *versiongate.Config) { cfg.Conditions = conds })
	n.run(t)
	conds.wait(t, "ReleaseReady False StatusPending")
	require.False(t, n.gate.Ready())

	c.store.SetStatus(doneStatus(t, "2.0.0", "1.0.0"))
	conds.wait(t, "ReleaseReady True ReleaseAdmitted")
	require.NoError(t, n.gate.WaitReady(ctx), "True, but WaitReady would not return")

	n.conn.DropKeepAlives(true)
	c.stepRecord(versiongate.DefaultRecordTTL - 500*time.Millisecond)
	require.ErrorIs(t, n.runErr(t), versiongate.ErrRecordLost)
	require.Equal(t, "ReleaseReady False RecordLost", conds.last(), "reported before Run returned")
	got := conds.list()
	require.Equal(t, []string{"ReleaseReady True ReleaseAdmitted", "ReleaseReady False RecordLost"}, got[len(got)-2:])
	for i := 1; i < len(got); i++ {
		require.NotEqual(t, got[i-1], got[i], "reported twice without a change: %q", got)
	}
	require.Contains(t, c.store.Records(), "n1", "the store expired the record before the condition turned False")
}

// A reporter that blocks does not hold up the gate: it leads, reconciles
// and WaitReady returns while the reporter is stuck; the newest state is
// reported once it returns, and a clean stop reports GateStopped.
func TestConditionReporterNeverBlocksGate(t *testing.T) {
	c := newMemCluster(t)
	ctx := context.Background()
	conds := newConditions()
	conds.block = make(chan struct{})
	n := c.node("n1", "1.0.0", "1.0.0", -1, func(cfg *versiongate.Config) {
		cfg.Conditions = conds
		cfg.ConditionType = "Admitted"
	})
	n.run(t)
	require.NoError(t, versiongatetest.WaitPhase(ctx, n.gate, versiongate.PhaseDone))
	require.NoError(t, n.gate.WaitReady(ctx))
	require.Empty(t, conds.list())
	close(conds.block)
	conds.wait(t, "Admitted True ReleaseAdmitted")
	n.stop()
	require.NoError(t, n.runErr(t))
	require.Equal(t, "Admitted False GateStopped", conds.last())
}

// With RejoinAfterRecordLoss a partitioned node stops serving at its
// record's local deadline exactly as without it (Ready false, condition
// RecordLost, event and observation), and Run does not return: once the
// partition heals and the lost record has expired, it publishes a new
// record and the node serves again.
func TestRejoinAfterPartition(t *testing.T) {
	c := newMemCluster(t)
	ctx := context.Background()
	c.store.SetStatus(doneStatus(t, "1.0.0", "1.0.0"))
	conds := newConditions()
	n := c.node("n1", "1.0.0", "1.0.0", -1, func(cfg *versiongate.Config) {
		cfg.Conditions = conds
		cfg.RejoinAfterRecordLoss = true
	})
	n.run(t)
	require.NoError(t, n.gate.WaitReady(ctx))
	conds.wait(t, "ReleaseReady True ReleaseAdmitted")
	oldLease := c.store.Lease("n1")

	n.conn.Cut()
	c.stepRecord(versiongate.DefaultRecordTTL - 500*time.Millisecond)
	conds.wait(t, "ReleaseReady False RecordLost")
	require.False(t, n.gate.Ready())
	require.NoError(t, versiongatetest.Wait(ctx, "the RecordLost observation", func() bool {
		return len(n.rec.observations(versiongate.EventRecordLost)) == 1
	}, nil))
	require.Contains(t, n.rec.eventList(), "Warning RecordLost")
	require.Contains(t, c.store.Records(), "n1", "the store expired the record before the node stopped serving")

	n.conn.Heal()
	c.storeClock.Step(time.Second)
	require.NoError(t, versiongatetest.Wait(ctx, "the store to expire the lost record", func() bool {
		return c.store.Lease("n1") != oldLease
	}, nil))
	stop := pump(c.clock, time.Second)
	conds.wait(t, "ReleaseReady True ReleaseAdmitted")
	stop()
	require.NoError(t, n.gate.WaitReady(ctx))
	require.True(t, n.gate.Ready())
	require.Contains(t, c.store.Records(), "n1")
	require.NotEqual(t, oldLease, c.store.Lease("n1"), "a new record")
	select {
	case err := <-n.errc:
		n.errc <- err
		t.Fatalf("Run returned %v", err)
	default:
	}
}

// Rejoining backs off: after a loss Run waits 100ms (up to half as much
// again, at random) before it publishes again, twice as long after a
// record that was lost again at once, and 100ms again after a record that
// lasted its TTL.
func TestRejoinBacksOff(t *testing.T) {
	c := newMemCluster(t)
	ctx := context.Background()
	// A newer node keeps this one from campaigning: after a loss the only
	// wait on the gate's clock is the rejoin's.
	newer, err := versiongate.EncodeNodeRelease("newer", versiongate.Version{Release: mustRelease(t, "2.0.0")})
	require.NoError(t, err)
	c.store.PutRecord("newer", newer)
	n := c.node("n1", "1.0.0", "1.0.0", -1, func(cfg *versiongate.Config) { cfg.RejoinAfterRecordLoss = true })
	n.run(t)
	published := func() {
		t.Helper()
		require.NoError(t, versiongatetest.Wait(ctx, "the record published", func() bool { return c.store.Lease("n1") != 0 }, nil))
	}
	loseAndRejoinAfter := func(want time.Duration) {
		t.Helper()
		c.store.RevokeLease(c.store.Lease("n1"))
		stepWhenWaiting(t, c.recClock, versiongate.DefaultRecordTTL/3) // the keep-alive finds the lease gone
		stepWhenWaiting(t, c.clock, want-time.Millisecond)
		require.True(t, c.clock.HasWaiters(), "rejoined before %v", want)
		require.Zero(t, c.store.Lease("n1"), "rejoined before %v", want)
		c.clock.Step(want/2 + time.Millisecond)
		published()
	}
	published()
	loseAndRejoinAfter(100 * time.Millisecond)
	loseAndRejoinAfter(200 * time.Millisecond)
	loseAndRejoinAfter(400 * time.Millisecond)
	c.clock.Step(versiongate.DefaultRecordTTL) // the record lasts its TTL
	loseAndRejoinAfter(100 * time.Millisecond)
	require.Len(t, n.rec.observations(versiongate.EventRecordLost), 4)
}
