package etcd_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconkit/reconkit/election"
	"github.com/reconkit/reconkit/election/etcd"
	"github.com/reconkit/reconkit/internal/etcdfault"
	"github.com/reconkit/reconkit/internal/testenv"
)

// heldMonitor makes the first expiry a term's monitor arms on clk wait,
// after the monitor read the clock and before the timer is armed: held
// receives once the monitor is there, and it goes on once release is
// called. The caller defers release: the elector's Close, at cleanup,
// waits for the monitor.
func heldMonitor(clk *termClock) (held <-chan struct{}, release func()) {
	h := make(chan struct{}, 1)
	r := make(chan struct{})
	var once, closeOnce sync.Once
	clk.hold = func() {
		once.Do(func() {
			h <- struct{}{}
			<-r
		})
	}
	release = func() { closeOnce.Do(func() { close(r) }) }
	return h, release
}

// stagedTerm wins a term on srv on clk, with a 10 s session TTL, whose
// renewals after the campaign's all fail at once: its ValidUntil never
// moves, and it ends by its monitor's expiry alone.
func stagedTerm(t *testing.T, srv *testenv.EtcdCluster, prefix string, clk *termClock) *etcd.Leadership {
	t.Helper()
	f := &countedRenewals{calls: make(chan struct{}, 64)}
	cli := etcdfault.Client(t, srv.Members[0].ClientAddr(), 1, nil, f.stream)
	e, err := etcd.New(etcd.Config{Client: cli, Prefix: prefix, Identity: "leader", SessionTTL: 10 * time.Second, Clock: clk})
	require.NoError(t, err)
	t.Cleanup(func() { _ = e.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	l, err := e.CampaignEtcd(ctx)
	require.NoError(t, err)
	f.armed.Store(true)
	return l
}

// ended waits for l's term to end and returns its cause.
func ended(t *testing.T, l *etcd.Leadership, what string) error {
	t.Helper()
	select {
	case <-l.Context().Done():
	case <-time.After(spinDeadline):
		require.FailNow(t, "the term did not end", what)
	}
	return context.Cause(l.Context())
}

// The race termClock.awaitExpiry exists for, staged: a term's monitor is
// held after it read the clock for its expiry timer and before it armed
// it (termClock.hold), as a loaded machine may hold it.
//
// A test that steps the clock by 1 s there gets the timer due 1 s after
// ValidUntil: on the fake clock the term outlives ValidUntil, and ends by
// its expiry only once the clock reaches ValidUntil + 1 s.
//
// A test that first calls awaitExpiry(ValidUntil) cannot step there:
// awaitExpiry is still waiting while the monitor is held (the test
// releases the monitor only once awaitExpiry has reported that it waits,
// and fails if the step came first), and the term ends at ValidUntil.
func TestEtcdTermClockStagesTheLateExpiry(t *testing.T) {
	t.Parallel() // an etcd of its own; waits on the server, not the CPU
	srv := testenv.Etcd(t)
	const step = time.Second

	t.Run("stepping before the expiry is armed", func(t *testing.T) {
		clk := newTermClock(nil)
		held, release := heldMonitor(clk)
		defer release()
		l := stagedTerm(t, srv, "/race-early", clk)
		validUntil := l.ValidUntil()
		receive(t, held, "the monitor between its read of the clock and its expiry timer")
		clk.Step(step)
		release()
		clk.awaitExpiry(t, validUntil.Add(step), "the expiry armed late by the step")
		due, _ := clk.lastExpiry()
		require.True(t, validUntil.Add(step).Equal(due), "the expiry of a term whose monitor was overtaken by a step: due at %v, ValidUntil %v", due, validUntil)
		now := make(chan time.Time)
		close(now)
		_, ok := clk.waitExpiry(validUntil, now)
		require.False(t, ok, "awaitExpiry would take the expiry due at ValidUntil + the step for one due at ValidUntil")
		clk.Step(validUntil.Sub(clk.Now()))
		require.False(t, l.ValidNow(), "ValidNow at ValidUntil")
		clk.Step(step)
		require.ErrorIs(t, ended(t, l, "at ValidUntil + the step"), election.ErrLeadershipLost)
	})

	t.Run("awaitExpiry before stepping", func(t *testing.T) {
		clk := newTermClock(nil)
		waiting := make(chan struct{}, 1)
		clk.waiting = func() {
			select {
			case waiting <- struct{}{}:
			default:
			}
		}
		held, release := heldMonitor(clk)
		defer release()
		l := stagedTerm(t, srv, "/race-waited", clk)
		validUntil := l.ValidUntil()
		receive(t, held, "the monitor between its read of the clock and its expiry timer")
		start := clk.Now()
		stepped := make(chan struct{})
		go func() {
			defer close(stepped)
			if _, ok := clk.waitExpiry(validUntil, time.After(spinDeadline)); ok {
				clk.Step(step)
			}
		}()
		select {
		case <-stepped:
			require.FailNow(t, "the clock was stepped while the monitor was held before arming its expiry")
		case <-waiting:
		}
		release()
		receive(t, stepped, "the step after awaitExpiry")
		due, _ := clk.lastExpiry()
		require.True(t, validUntil.Equal(due), "the expiry armed before the step: due at %v, ValidUntil %v", due, validUntil)
		require.True(t, clk.Now().Equal(start.Add(step)), "awaitExpiry did not return within %v", spinDeadline)
		clk.Step(validUntil.Sub(clk.Now()))
		require.ErrorIs(t, ended(t, l, "at ValidUntil"), election.ErrLeadershipLost)
		require.True(t, clk.Now().Equal(validUntil), "the term ended at %v, ValidUntil %v", clk.Now(), validUntil)
	})
}
