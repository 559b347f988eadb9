package etcd_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconkit/reconkit/election"
	"github.com/reconkit/reconkit/election/etcd"
	"github.com/reconkit/reconkit/internal/etcdfault"
	"github.com/reconkit/reconkit/internal/testenv"
)

// renewalTry is one failed renewal of a term: the validity it had left
// when its retry was chosen, and the pause chosen.
type renewalTry struct {
	left, pause time.Duration
}

// failRenewals campaigns on srv with a 60 s session TTL on a clock of its
// own, makes every renewal fail at once, and drives the term's retries by
// stepping the clock by exactly each pause, until a pause would end past
// the term's validity. It returns each failed try's validity left and
// the pause that followed it. r is the elector's Config.Rand.
func failRenewals(t *testing.T, srv *testenv.EtcdCluster, prefix string, r func() float64) []renewalTry {
	t.Helper()
	const ttl = 60 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	clk := newTermClock(make(chan time.Duration, 1))
	f := &failingRenewals{calls: make(chan struct{})}
	cli := etcdfault.Client(t, srv.Members[0].ClientAddr(), 0, nil, f.stream)
	e, err := etcd.New(etcd.Config{Client: cli, Prefix: prefix, Identity: "leader", SessionTTL: ttl, Clock: clk, Rand: r})
	require.NoError(t, err)
	t.Cleanup(func() { _ = e.Close() })
	l, err := e.Campaign(ctx)
	require.NoError(t, err)
	defer func() { require.NoError(t, l.Resign(ctx)) }()
	// The test requires the term live up to its ValidUntil: that holds
	// only if the monitor's expiry is due there, not late by a first step
	// (20 s) taken before the monitor armed it.
	clk.awaitExpiry(t, l.(election.Expiring).ValidUntil(), "the monitor's expiry timer")
	f.armed.Store(true)
	require.Equal(t, ttl/3, receive(t, clk.keep, "the first renewal's timer"), "renewal interval")
	clk.Step(ttl / 3)
	var tries []renewalTry
	for {
		receive(t, f.calls, "a renewal")
		pause := receive(t, clk.keep, "the pause after a failed renewal")
		left := l.(election.Expiring).ValidUntil().Sub(clk.Now())
		tries = append(tries, renewalTry{left: left, pause: pause})
		if pause >= left {
			require.NoError(t, l.Context().Err(), "the term ended before its validity")
			return tries
		}
		require.Less(t, len(tries), 30, "retries of one term")
		clk.Step(pause)
	}
}

// A term's failed renewals are retried after pauses that grow by half from
// 500 ms to TTL/3, each drawn from [w, 1.2w]; the try that the growing
// pause would put past the term's validity is brought forward to start
// at least 250 ms before it (never below a quarter of the pause it
// replaces), and after it no try starts before the validity ends. Two
// terms whose renewals fail at the same instant of their clocks retry at
// different instants: jitter, which these retries lacked.
//
// The session TTL is 60 s: the renewals' pauses, w, then fit eight
// times (at most 29.6 s) into the 34 s of validity the first failure
// leaves, and the ninth, at least 12.8 s, never fits, whatever the draws.
// The clock is fake and stepped by each pause exactly: nothing depends on
// how fast the machine is.
func TestEtcdRenewalRetriesJitterAndMeetTheDeadline(t *testing.T) {
	t.Parallel() // an etcd of its own; waits on the server, not the CPU
	srv := testenv.Etcd(t)
	const (
		first    = 500 * time.Millisecond
		interval = 20 * time.Second
		reserve  = first / 2
	)
	var runs [][]time.Duration
	for _, prefix := range []string{"/jitter-a", "/jitter-b"} {
		tries := failRenewals(t, srv, prefix, nil)
		t.Logf("%s: %v", prefix, tries)
		require.Len(t, tries, 10, "eight paced retries, one brought forward, then the deadline")
		w := first
		jittered := false
		var pauses []time.Duration
		for i, try := range tries {
			switch {
			case i < 8:
				require.GreaterOrEqual(t, try.pause, w, "try %d: below its backoff", i+1)
				require.LessOrEqual(t, try.pause, w+w/5, "try %d: above its jitter", i+1)
				require.LessOrEqual(t, try.pause, try.left-reserve, "try %d: late", i+1)
				jittered = jittered || try.pause != w
			case i == 8:
				require.Less(t, try.left-reserve, w, "try %d: the backoff would fit", i+1)
				require.LessOrEqual(t, try.pause, try.left-reserve, "the last try starts less than %v before the deadline", reserve)
				require.GreaterOrEqual(t, try.pause, max(first, w/4), "the last try crowds the one before")
			default:
				require.GreaterOrEqual(t, try.pause, try.left, "a try after the last that fits")
			}
			pauses = append(pauses, try.pause)
			w = min(w+w/2, interval)
		}
		require.True(t, jittered, "every pause was its backoff exactly: no jitter")
		runs = append(runs, pauses)
	}
	require.False(t, slices.Equal(runs[0], runs[1]), "two terms failing at the same instant retried at the same instants: no jitter")
}

// Config.Rand is the source of a term's renewal retries: a source that
// always draws 0.25 makes each paced pause w + 0.25 × w/5 exactly.
func TestEtcdRenewalRetriesDrawFromConfigRand(t *testing.T) {
	t.Parallel() // an etcd of its own; waits on the server, not the CPU
	srv := testenv.Etcd(t)
	tries := failRenewals(t, srv, "/rand", func() float64 { return 0.25 })
	require.Len(t, tries, 10, "eight paced retries, one brought forward, then the deadline")
	w := 500 * time.Millisecond
	for i, try := range tries[:8] {
		require.Equal(t, w+time.Duration(0.25*0.2*float64(w)), try.pause, "try %d", i+1)
		w = min(w+w/2, 20*time.Second)
	}
}
