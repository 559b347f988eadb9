package storecheck_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconkit/reconkit/versiongate/internal/storecheck"
)

// budgetTB records the errors CheckBudget reports.
type budgetTB struct {
	testing.TB
	errs []string
}

func (b *budgetTB) Helper()                   {}
func (b *budgetTB) Logf(string, ...any)       {}
func (b *budgetTB) Errorf(f string, a ...any) { b.errs = append(b.errs, fmt.Sprintf(f, a...)) }

// calls makes n calls of kind by client, every gap from start.
func calls(client string, in storecheck.Input, n int, start, gap time.Duration) []storecheck.Op {
	var ops []storecheck.Op
	for i := range n {
		ops = append(ops, storecheck.Op{Name: client, Input: in, Call: start + time.Duration(i)*gap})
	}
	return ops
}

// A readiness wait reading every 100ms (as one with its backoff removed
// does while the server refuses it) goes past the budget; one backing off
// from 100ms doubling, the observer's calls, and reads spread out do not.
func TestCheckBudget(t *testing.T) {
	b := storecheck.DefaultBudget(3 * time.Second)
	read := storecheck.Input{Kind: storecheck.KindRead}
	watch := storecheck.Input{Kind: storecheck.KindWatch, Status: true}

	var backoff []storecheck.Op
	at, pause := time.Duration(0), 100*time.Millisecond
	for at < time.Minute {
		backoff = append(backoff, storecheck.Op{Name: "waiter", Input: read, Call: at}, storecheck.Op{Name: "waiter", Input: watch, Call: at})
		at += pause
		pause = min(2*pause, 10*time.Second)
	}
	for _, tc := range []struct {
		name  string
		calls []storecheck.Op
		over  int
	}{
		{"backing off", backoff, 0},
		{"observer at a fixed pace", calls("observer", read, 600, 0, 100*time.Millisecond), 0},
		{"a read a second", calls("node", read, 60, 0, time.Second), 0},
		{"a read every 100ms", calls("node", read, 100, 0, 100*time.Millisecond), 2}, // reads, and calls in all
		{"a read and a watch every 100ms (the herd)", append(calls("node", read, 100, 0, 100*time.Millisecond), calls("node", watch, 100, 0, 100*time.Millisecond)...), 3},
		{"listings every 200ms", calls("node", storecheck.Input{Kind: storecheck.KindList}, 60, 0, 200*time.Millisecond), 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tb := &budgetTB{TB: t}
			storecheck.CheckBudget(tb, tc.calls, b)
			require.Len(t, tb.errs, tc.over, "%q", tb.errs)
		})
	}
}
