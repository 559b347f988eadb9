package versiongate_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconkit/reconkit/versiongate"
	"github.com/reconkit/reconkit/versiongate/versiongatetest"
)

// The node record's keep-alive loop under a store that answers every
// renewal with the same error. Each test runs in a synctest bubble: the
// gate's clocks are the bubble's, so the instants counted are fake time,
// exact, and do not depend on the machine's speed. The renewals are what
// these tests measure, on a clock they control.

// keepAliveCounter answers KeepAlive with errKeepAlive while failing is
// set, and records the instant of every KeepAlive call.
type keepAliveCounter struct {
	versiongate.Store
	mu      sync.Mutex
	failing bool
	calls   []time.Time
	renewed int // calls that reached the store and succeeded
}

// errKeepAlive is what a server answers for good: a 503, a 429, a 403, a
// refused connection all look alike to the keep-alive loop.
var errKeepAlive = errors.New("test: 503 Service Unavailable")

func (s *keepAliveCounter) KeepAlive(ctx context.Context, l versiongate.RecordLease) (time.Duration, error) {
	s.mu.Lock()
	s.calls = append(s.calls, time.Now())
	failing := s.failing
	s.mu.Unlock()
	if failing {
		return 0, errKeepAlive
	}
	d, err := s.Store.KeepAlive(ctx, l)
	if err == nil {
		s.mu.Lock()
		s.renewed++
		s.mu.Unlock()
	}
	return d, err
}

func (s *keepAliveCounter) setFailing(f bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failing = f
}

func (s *keepAliveCounter) callList() []time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.calls)
}

// recordGate is a gate with a gate-owned record of ttl on store, that
// never leads; Run runs until ctx ends or the record is lost.
func recordGate(t *testing.T, store versiongate.Store, id string, ttl time.Duration) *versiongate.Gate {
	t.Helper()
	g, err := versiongate.New(versiongate.Config{
		Store: store, NodeID: id, Version: ver(t, "1.0.0"), MinimumCompatibleRelease: mustRelease(t, "1.0.0"),
		RecordTTL: ttl, Candidate: neverWins,
		Reconcile: func(context.Context, versiongate.Term) error { return nil },
	})
	require.NoError(t, err)
	return g
}

// perSecond counts calls in each whole second after from.
func perSecond(calls []time.Time, from time.Time) map[int]int {
	n := map[int]int{}
	for _, c := range calls {
		if !c.Before(from) {
			n[int(c.Sub(from)/time.Second)]++
		}
	}
	return n
}

// The store answers every renewal with an error from the instant the
// records are published, for records of 60 s and 40 s (kubestore's doc
// recommends 40 s for large fleets): a fixed 500 ms retry pace sends two
// renewals a second until the validity ends, 0.9 × TTL after the last
// success, so beyond 30 s of the answer. Two gates, published at the same
// instant, meet the same answer together.
//
// Held: from 30 s of the answer on, each gate sends at most one renewal in
// any second of fake time; no retry of one gate is at an instant of the
// other's (jitter); each keeps trying until near its deadline, its last try
// leaving the margin to complete; and each loses its record exactly at its
// local deadline (TTL less a tenth), as before: retries change no safety.
func TestRenewalRetriesBackOffUnderPersistentErrors(t *testing.T) {
	for _, ttl := range []time.Duration{60 * time.Second, 40 * time.Second} {
		t.Run(ttl.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				mem := versiongatetest.NewStore(versiongatetest.StoreConfig{})
				stores := []*keepAliveCounter{{Store: mem, failing: true}, {Store: mem, failing: true}}
				start := time.Now()
				errs := make([]error, len(stores))
				ended := make([]time.Duration, len(stores))
				var wg sync.WaitGroup
				for i, st := range stores {
					g := recordGate(t, st, fmt.Sprintf("n%d", i), ttl)
					wg.Go(func() {
						errs[i] = g.Run(t.Context())
						ended[i] = time.Since(start)
					})
				}
				wg.Wait()

				margin := ttl / 10
				deadline := ttl - margin
				interval := ttl / 3
				calls := make([][]time.Time, len(stores))
				for i, st := range stores {
					require.ErrorIs(t, errs[i], versiongate.ErrRecordLost, "gate %d", i)
					require.Equal(t, deadline, ended[i], "gate %d: the record is lost at its local deadline", i)
					calls[i] = st.callList()
					var at []string
					for _, c := range calls[i] {
						at = append(at, c.Sub(start).Round(time.Millisecond).String())
					}
					t.Logf("gate %d: %d renewals at %v", i, len(calls[i]), at)

					require.Equal(t, start.Add(interval), calls[i][0], "gate %d: the first renewal is due at TTL/3", i)
					for s, n := range perSecond(calls[i], start.Add(30*time.Second)) {
						require.LessOrEqual(t, n, 1, "gate %d: renewals in second %d after 30 s of errors", i, 30+s)
					}
					require.LessOrEqual(t, len(calls[i]), 12, "gate %d: renewals in all", i)
					require.GreaterOrEqual(t, len(calls[i]), 5, "gate %d: it gave up retrying", i)
					last := calls[i][len(calls[i])-1].Sub(start)
					require.LessOrEqual(t, last, deadline-margin, "gate %d: the last try leaves the margin to complete", i)
					require.GreaterOrEqual(t, last, deadline-interval, "gate %d: the last try is needlessly early", i)
				}
				for _, c := range calls[0][1:] {
					require.NotContains(t, calls[1][1:], c, "the gates retried at the same instant %v (no jitter)", c.Sub(start))
				}
			})
		})
	}
}

// The store answers renewals with an error for 40 s of a 60 s record's
// validity of 54 s, then serves them again: the backed-off retries still
// renew the record before its local deadline, the gate stays ready past
// that deadline and keeps its record, and renewals return to TTL/3. A
// later failure is retried from the first pause again.
func TestRenewalRecoversWhenTheErrorClears(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const ttl = 60 * time.Second
		mem := versiongatetest.NewStore(versiongatetest.StoreConfig{})
		mem.SetStatus(doneStatus(t, "1.0.0", "1.0.0"))
		st := &keepAliveCounter{Store: mem, failing: true}
		g := recordGate(t, st, "n1", ttl)
		ctx, cancel := context.WithCancel(t.Context())
		start := time.Now()
		done := make(chan error, 1)
		go func() { done <- g.Run(ctx) }()
		require.NoError(t, g.WaitReady(ctx))

		<-time.After(40 * time.Second)
		require.True(t, g.Ready(), "ready before the deadline")
		st.setFailing(false)
		// Past the deadline the record would have had without a renewal.
		<-time.After(20 * time.Second)
		require.True(t, g.Ready(), "the record was not renewed before its deadline")
		<-time.After(2 * time.Minute)
		synctest.Wait()
		require.True(t, g.Ready())
		select {
		case err := <-done:
			t.Fatalf("Run returned %v", err)
		default:
		}
		require.Contains(t, mem.Records(), "n1")

		calls := st.callList()
		var after []time.Duration
		for _, c := range calls {
			if d := c.Sub(start); d >= 40*time.Second {
				after = append(after, d)
			}
		}
		t.Logf("%d renewals, from 40 s at %v", len(calls), after)
		require.NotEmpty(t, after)
		require.Less(t, after[0], ttl-2*ttl/10, "the first renewal after the error cleared leaves the margin")
		st.mu.Lock()
		renewed := st.renewed
		st.mu.Unlock()
		// From the first success (before 54 s) to 180 s: one renewal per
		// 20 s, 7 at most.
		require.GreaterOrEqual(t, renewed, 6)
		require.LessOrEqual(t, renewed, 7)

		// A renewal that succeeded starts the backoff again: the next
		// failure is retried after 500 ms to 750 ms, not after the long
		// pauses of the first outage.
		st.setFailing(true)
		before := len(st.callList())
		<-time.After(25 * time.Second)
		again := st.callList()[before:]
		require.GreaterOrEqual(t, len(again), 2)
		first := again[1].Sub(again[0])
		t.Logf("after a success, the first retry %v after the failure", first)
		require.GreaterOrEqual(t, first, 500*time.Millisecond)
		require.LessOrEqual(t, first, 750*time.Millisecond)

		cancel()
		require.NoError(t, <-done)
	})
}
