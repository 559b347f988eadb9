package versiongatetest

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/reconkit/reconkit/versiongate"
)

// DefaultWait bounds the Wait helpers when their context has no deadline
// of its own: generous, so that a loaded machine is never mistaken for a
// failure, and finite, so that a regression fails with a message instead
// of hanging until the test binary's timeout.
const DefaultWait = time.Minute

// Wait blocks until cond holds, re-checking it each time changed (called
// anew after every wake-up) fires, and at least every 10ms in case some of
// the state cond reads has no notification. It returns an error naming
// what when ctx ends or DefaultWait passes first.
func Wait(ctx context.Context, what string, cond func() bool, changed func() <-chan struct{}) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultWait)
		defer cancel()
	}
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		var ch <-chan struct{}
		if changed != nil {
			ch = changed()
		}
		if cond() {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("versiongatetest: waiting for %s: %w", what, context.Cause(ctx))
		case <-ch:
		case <-tick.C:
		}
	}
}

// WaitPhase blocks until g's phase is one of phases (see Wait).
func WaitPhase(ctx context.Context, g *versiongate.Gate, phases ...versiongate.Phase) error {
	err := Wait(ctx, fmt.Sprintf("phase %v", phases), func() bool { return slices.Contains(phases, g.Phase()) }, g.PhaseChanged)
	if err != nil {
		return fmt.Errorf("%w (phase is %s)", err, g.Phase())
	}
	return nil
}

// WaitLeading blocks until g.Leading() equals leading (see Wait).
func WaitLeading(ctx context.Context, g *versiongate.Gate, leading bool) error {
	return Wait(ctx, fmt.Sprintf("leading=%v", leading), func() bool { return g.Leading() == leading }, g.LeadingChanged)
}

// WaitBlocking blocks until g.Blocking() lists exactly the node IDs ids, in
// any order (see Wait).
func WaitBlocking(ctx context.Context, g *versiongate.Gate, ids ...string) error {
	want := slices.Sorted(slices.Values(ids))
	got := func() []string {
		var out []string
		for _, n := range g.Blocking() {
			out = append(out, n.ID)
		}
		return out
	}
	err := Wait(ctx, fmt.Sprintf("blocking nodes %v", want), func() bool { return slices.Equal(got(), want) }, nil)
	if err != nil {
		return fmt.Errorf("%w (blocking: %v)", err, got())
	}
	return nil
}

// WaitNodes blocks until g's releases summary counts n member nodes (see
// Wait).
func WaitNodes(ctx context.Context, g *versiongate.Gate, n int) error {
	return Wait(ctx, fmt.Sprintf("%d member nodes", n), func() bool {
		r, ok := g.Releases()
		return ok && r.Nodes == n
	}, nil)
}
