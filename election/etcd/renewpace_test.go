package etcd_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/reconkit/reconkit/election"
	"github.com/reconkit/reconkit/election/etcd"
	"github.com/reconkit/reconkit/internal/etcdfault"
	"github.com/reconkit/reconkit/internal/testenv"
)

// These tests hold the pace of a failing term's renewals through
// Leadership.keep, on a real etcd whose answers to the term's renewals
// fail at once, and on a fake clock stepped by exactly each pause keep asks
// for (termClock): they count every renewal keep sends and when, and no
// figure depends on how fast the machine is. The pace itself, renewRetry,
// is held case by case in renewretry_test.go.

// drawNearOne is the largest float64 below 1: the highest draw a Rand gives.
const drawNearOne = 1 - 0x1p-53

// countedRenewals is an etcd whose answers to the elector's renewals (see
// isRenewal) fail at once once armed; it counts every renewal it fails
// and reports each on calls.
type countedRenewals struct {
	armed atomic.Bool
	n     atomic.Int64
	calls chan struct{}
}

func (f *countedRenewals) stream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	if !f.armed.Load() || !isRenewal(ctx, method) {
		return streamer(ctx, desc, cc, method, opts...)
	}
	f.n.Add(1)
	select {
	case f.calls <- struct{}{}:
	case <-ctx.Done():
	}
	return nil, status.Error(codes.Unavailable, "etcd unavailable")
}

// failedTerm is what failTerm saw of a term whose every renewal failed.
type failedTerm struct {
	interval time.Duration   // the renewal interval keep asked for first
	validity time.Duration   // from the last success to ValidUntil
	at       []time.Duration // each try, from the last success
	left     []time.Duration // the validity left when each try started
	pauses   []time.Duration // the pause keep chose after each try
}

// failTerm campaigns on srv with session TTL ttl and Config.Rand r, on a
// clock of its own, and makes every renewal fail at once from the first
// on. It steps the clock by exactly each pause keep asks for, until a
// pause reaches past ValidUntil; then it steps to ValidUntil and requires
// the term to end there, lost, with no try after the last one seen.
func failTerm(t *testing.T, srv *testenv.EtcdCluster, prefix string, ttl time.Duration, r func() float64) failedTerm {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	clk := newTermClock(make(chan time.Duration, 1))
	f := &countedRenewals{calls: make(chan struct{})}
	cli := etcdfault.Client(t, srv.Members[0].ClientAddr(), 1, nil, f.stream)
	e, err := etcd.New(etcd.Config{Client: cli, Prefix: prefix, Identity: "leader", SessionTTL: ttl, Clock: clk, Rand: r})
	require.NoError(t, err)
	defer func() { _ = e.Close() }()
	l, err := e.Campaign(ctx)
	require.NoError(t, err)
	success := clk.Now() // the campaign's renewal, the last success
	validUntil := l.(election.Expiring).ValidUntil()
	// The term's monitor ends it at ValidUntil on a timer it sets when it
	// starts, for a duration from its own read of the clock: a step
	// between that read and the timer would set it late by the step, so
	// the clock is stepped only once that timer is set.
	clk.awaitExpiry(t, validUntil, "the monitor's expiry timer")
	ft := failedTerm{validity: validUntil.Sub(success)}
	f.armed.Store(true)
	ft.interval = receive(t, clk.keep, "the first renewal's timer")
	clk.Step(ft.interval)
	for {
		receive(t, f.calls, "a renewal")
		require.NoError(t, l.Context().Err(), "the term ended before ValidUntil")
		require.Equal(t, validUntil, l.(election.Expiring).ValidUntil(), "a failed renewal moved ValidUntil")
		left := validUntil.Sub(clk.Now())
		pause := receive(t, clk.keep, "the pause after a failed renewal")
		ft.at = append(ft.at, clk.Since(success))
		ft.left = append(ft.left, left)
		ft.pauses = append(ft.pauses, pause)
		if pause >= left {
			break
		}
		require.Less(t, len(ft.at), 100, "tries of one term")
		clk.Step(pause)
	}
	clk.Step(validUntil.Sub(clk.Now()))
	select {
	case <-l.Context().Done():
	case <-time.After(spinDeadline):
		require.FailNow(t, "the term did not end at ValidUntil")
	}
	require.ErrorIs(t, context.Cause(l.Context()), election.ErrLeadershipLost)
	require.NoError(t, e.Close()) // waits for keep
	require.EqualValues(t, len(ft.at), f.n.Load(), "renewals sent, against the tries seen")
	return ft
}

// Through keep, at the default TTL (10 s): the first failed renewal comes
// TTL/3 after the last success; then the term makes, in all, six tries
// before ValidUntil for draws of 0 and 0.5 and five for the highest (the
// doc's "five or six ... rather than twelve"), each starting at least 250
// ms before ValidUntil, the one brought forward drawn from the last third
// of the time to 250 ms before it; the paced pauses grow by half from 500 ms, each w
// plus the draw's share of a fifth, none past TTL/3 plus a fifth; at most
// two tries in any second of the fake clock; and the term ends at
// ValidUntil, not before and not after, with no further renewal.
func TestEtcdFailingTermRenewsAtTheDocumentedPace(t *testing.T) {
	t.Parallel() // an etcd of its own; waits on the server, not the CPU
	srv := testenv.Etcd(t)
	const (
		ttl      = etcd.DefaultSessionTTL
		interval = ttl / 3
		reserve  = 250 * time.Millisecond
	)
	want := map[float64]int{0: 6, 0.5: 6, drawNearOne: 5}
	for i, r := range []float64{0, 0.5, drawNearOne} {
		ft := failTerm(t, srv, "/pace-"+string(rune('a'+i)), ttl, func() float64 { return r })
		t.Logf("draw %v: tries at %v, pauses %v", r, ft.at, ft.pauses)
		require.Equal(t, interval, ft.interval, "renewal interval")
		require.Equal(t, interval, ft.at[0], "the first failed renewal")
		require.Len(t, ft.at, want[r], "draw %v: tries before ValidUntil", r)
		w := 500 * time.Millisecond
		for j, left := range ft.left {
			require.GreaterOrEqual(t, left, reserve, "draw %v: try %d starts less than %v before ValidUntil", r, j+1, reserve)
			if p := ft.pauses[j]; p < left {
				require.LessOrEqual(t, p, interval+interval/5, "draw %v: pause %d past TTL/3 and its jitter", r, j+1)
			}
			switch {
			case j < 4: // the paced pauses: 0.5, 0.75, 1.125 and 1.6875 s, each up to a fifth longer
				require.InDelta(t, float64(w+time.Duration(r*float64(w)/5)), float64(ft.pauses[j]), 2, "draw %v: pause %d", r, j+1)
			case j == 4 && ft.pauses[j] < left:
				// Brought forward: drawn from the last third of the time
				// to the reserve before ValidUntil (backoff.Renewal), or
				// from its floor up, a quarter of the 2.53 s it replaces.
				last := left - reserve
				lo := max(last-last/3, w/4)
				require.InDelta(t, float64(lo+time.Duration(r*float64(last-lo))), float64(ft.pauses[j]), 2, "draw %v: the pause brought forward", r)
			}
			w += w / 2
		}
		for j := range ft.at {
			in := 0
			for _, a := range ft.at[j:] {
				if a-ft.at[j] < time.Second {
					in++
				}
			}
			require.LessOrEqual(t, in, 2, "draw %v: tries within a second of try %d", r, j+1)
		}
	}
}

// Through keep, with a 300 s TTL: the pauses are paced as at the default
// TTL but grow through the whole validity, so the budget of BUDGETS.md is
// the one that binds: from 30 s into the failure (the first failed
// renewal, 100 s after the last success) to ValidUntil (270 s), at most
// one request a second, each try counted as two (its keep-alive and the
// read that follows one that succeeds), and no two tries within 2 s; each
// try starts at least 250 ms before ValidUntil, and no pause passes TTL/3
// plus a fifth.
func TestEtcdFailingTermKeepsTheBudgetWithALongTTL(t *testing.T) {
	t.Parallel() // an etcd of its own; waits on the server, not the CPU
	srv := testenv.Etcd(t)
	const ttl = 300 * time.Second
	for i, r := range []float64{0, 0.5, drawNearOne} {
		ft := failTerm(t, srv, "/long-"+string(rune('a'+i)), ttl, func() float64 { return r })
		t.Logf("draw %v: tries at %v", r, ft.at)
		require.Equal(t, ttl/3, ft.at[0], "the first failed renewal")
		since := ft.at[0] + 30*time.Second
		requests := 0
		for j, a := range ft.at {
			require.GreaterOrEqual(t, ft.left[j], 250*time.Millisecond, "draw %v: try %d starts less than 250 ms before ValidUntil", r, j+1)
			if p := ft.pauses[j]; p < ft.left[j] {
				require.LessOrEqual(t, p, ttl/3+ttl/15, "draw %v: pause %d past TTL/3 and its jitter", r, j+1)
			}
			if a < since {
				continue
			}
			requests += 2
			require.GreaterOrEqual(t, a-ft.at[j-1], 2*time.Second, "draw %v: tries %d and %d, 30 s into the failure", r, j, j+1)
		}
		window := ft.validity - since
		require.LessOrEqual(t, requests, int(window/time.Second), "draw %v: requests in the %v from 30 s into the failure to ValidUntil", r, window)
		require.Greater(t, requests, 0, "draw %v: no try after 30 s of failure: the term gave up early", r)
	}
}

// Through keep: a renewal that succeeds after failures moves ValidUntil
// to a full validity from its start, puts the next renewal TTL/3 later,
// and starts the pace again: the pause after the next failure is the
// first one, 500 ms, not the one that followed the failures before.
func TestEtcdRenewalPaceStartsAgainAfterASuccess(t *testing.T) {
	t.Parallel() // an etcd of its own; waits on the server, not the CPU
	srv := testenv.Etcd(t)
	const (
		ttl      = etcd.DefaultSessionTTL
		interval = ttl / 3
	)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	clk := newTermClock(make(chan time.Duration, 1))
	f := &countedRenewals{calls: make(chan struct{})}
	cli := etcdfault.Client(t, srv.Members[0].ClientAddr(), 1, nil, f.stream)
	e, err := etcd.New(etcd.Config{Client: cli, Prefix: "/pace-again", Identity: "leader", SessionTTL: ttl, Clock: clk, Rand: func() float64 { return 0 }})
	require.NoError(t, err)
	defer func() { _ = e.Close() }()
	l, err := e.Campaign(ctx)
	require.NoError(t, err)
	clk.awaitExpiry(t, l.(election.Expiring).ValidUntil(), "the monitor's expiry timer")
	validity := l.(election.Expiring).ValidUntil().Sub(clk.Now())
	require.Equal(t, interval, receive(t, clk.keep, "the first renewal's timer"))

	f.armed.Store(true)
	clk.Step(interval)
	for i, want := range []time.Duration{500 * time.Millisecond, 750 * time.Millisecond, 1125 * time.Millisecond} {
		receive(t, f.calls, "a renewal")
		require.Equal(t, want, receive(t, clk.keep, "the pause after a failed renewal"))
		if i == 2 {
			f.armed.Store(false) // the fourth try, after 1.125 s, succeeds
		}
		clk.Step(want)
	}
	require.Equal(t, interval, receive(t, clk.keep, "the renewal interval after a success"))
	require.Equal(t, clk.Now().Add(validity), l.(election.Expiring).ValidUntil(), "ValidUntil after the renewal that succeeded")
	// The monitor arms its expiry anew for the ValidUntil the renewal
	// moved, and a step may delay that timer; nothing below depends on
	// it: the term is required live at the end, and the step (to 9.04 s)
	// passes only the first ValidUntil, whose timer checks ValidUntil
	// again before it ends the term.
	f.armed.Store(true)
	clk.Step(interval)
	receive(t, f.calls, "a renewal")
	require.Equal(t, 500*time.Millisecond, receive(t, clk.keep, "the pause after the first failure since the success"))
	require.NoError(t, l.Context().Err())
	require.NoError(t, l.Resign(ctx))
}
