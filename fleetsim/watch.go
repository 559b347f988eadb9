package fleetsim

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/reconkit/reconkit/kubefake"
	"github.com/reconkit/reconkit/lbrecon/lbrecontest"
)

// Watch is a host's own invariants, checked while one run goes on: it is
// called once per run, on a goroutine of its own, as soon as the first
// agent starts, and must return once ctx ends (the run's end). It reads
// the world through w and reports what it finds with w.Violate.
type Watch func(ctx context.Context, w *World)

// World is one run as a host's [Watch] sees it: the provider itself, a
// client of the apiserver that no fault reaches, the timeline, and the
// run's violations. It is safe for concurrent use.
type World struct{ w *world }

// Provider returns the run's provider itself: Objects and WaitFor show
// every object as it is (objects being deleted included), not as a
// lagging listing shows it. A check reads it; it never writes through it
// (nothing it does passes the fence or is counted).
func (x *World) Provider() *lbrecontest.Engine { return x.w.engine }

// Observer returns the checks' own client of the apiserver: never cut,
// slowed or emptied by the nemesis, its requests counted against no agent.
func (x *World) Observer() *kubefake.Client { return x.w.observer }

// Since returns the simulated time since the run began, as the timeline
// shows it.
func (x *World) Since() time.Duration { return time.Since(x.w.tl.start) }

// Note adds a line to the timeline, from "check".
func (x *World) Note(format string, args ...any) { x.w.tl.add("check", format, args...) }

// Violate records a violation of inv, found by a host's check of the
// guarantee it quotes (which [Invariant.Guarantee] knows only for
// fleetsim's own invariants), to blame on agent ("" for none). As for
// fleetsim's own invariants, the first violation ends the run, and its
// report gives the seed and the timeline around it.
func (x *World) Violate(inv Invariant, guarantee, agent, format string, args ...any) {
	x.w.violate(inv, agent, "%s\n  checks: %s", fmt.Sprintf(format, args...), guarantee)
}

// TestWatched is [Test] with watch running alongside every run, from the
// start of its first agent to its end: its violations fail the run as
// fleetsim's own do, with the same report, flags and timeline.
func TestWatched(t *testing.T, cfg Config, watch Watch, seeds ...uint64) {
	t.Helper()
	if *seedFlag != 0 || *countFlag != 0 {
		seeds = nil
		for i := range max(1, *countFlag) {
			seeds = append(seeds, max(1, *seedFlag)+uint64(i))
		}
	}
	if len(seeds) == 0 {
		seeds = []uint64{1}
	}
	if cfg.Start.IsZero() {
		cfg.Start = time.Now().UTC().Truncate(24 * time.Hour)
	}
	for _, seed := range seeds {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c := cfg
				c.Seed = seed
				r := simulateWatched(t.Context(), c, watch)
				t.Logf("fleetsim-run seed=%d events=%d simulated=%s agent-hours=%.3f requests=%d violated=%v", seed,
					r.Events, r.Simulated.Round(time.Second), r.AgentTime.Hours(), r.Requests, len(r.Violations) > 0)
				if err := r.Err(); err != nil {
					if *timelineFlag != "" {
						writeTimeline(t, r)
					}
					t.Fatal(err)
				}
			})
		})
	}
}

// simulateWatched runs Simulate with watch alongside, and returns once
// watch has returned too.
func simulateWatched(ctx context.Context, cfg Config, watch Watch) Result {
	if watch == nil {
		return Simulate(ctx, cfg)
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	worlds := make(chan *World, 1)
	var once sync.Once
	agent := cfg.Agent
	cfg.Agent = func(ctx context.Context, d Deps) error {
		if l, ok := d.Engine.(*link); ok {
			once.Do(func() { worlds <- &World{w: l.w} })
		}
		return agent(ctx, d)
	}
	var watching sync.WaitGroup
	watching.Go(func() {
		select {
		case x := <-worlds:
			watch(ctx, x)
		case <-ctx.Done():
		}
	})
	r := Simulate(ctx, cfg)
	cancel()
	watching.Wait()
	return r
}
