package electiontest

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/reconkit/reconkit/election"
)

// Recorder is an election.Metrics and an election.EventRecorder that
// records what an elector reports, for tests: give it to a backend's
// Config as both Metrics and Events, then wait on a deadline for the
// observations a test expects, without polling.
type Recorder struct {
	mu     sync.Mutex
	obs    []election.Observation
	events []string // "eventtype reason"
	change chan struct{}
}

var (
	_ election.Metrics       = (*Recorder)(nil)
	_ election.EventRecorder = (*Recorder)(nil)
)

// NewRecorder returns an empty Recorder.
func NewRecorder() *Recorder { return &Recorder{change: make(chan struct{})} }

// Observe records o.
func (r *Recorder) Observe(o election.Observation) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.obs = append(r.obs, o)
	r.wake()
}

// Event records an event as "eventtype reason".
func (r *Recorder) Event(eventtype, reason, _ string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, eventtype+" "+reason)
	r.wake()
}

// wake wakes every waiter; r.mu is held.
func (r *Recorder) wake() {
	close(r.change)
	r.change = make(chan struct{})
}

// Is matches the observations of one event.
func Is(ev election.Event) func(election.Observation) bool {
	return func(o election.Observation) bool { return o.Event == ev }
}

// Await waits until an observation recorded so far or later satisfies ok,
// and returns the first that does. It gives up when ctx ends with an error
// that lists what was observed.
func (r *Recorder) Await(ctx context.Context, ok func(election.Observation) bool) (election.Observation, error) {
	for {
		r.mu.Lock()
		if i := slices.IndexFunc(r.obs, ok); i >= 0 {
			o := r.obs[i]
			r.mu.Unlock()
			return o, nil
		}
		ch, seen := r.change, fmt.Sprint(r.obs)
		r.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return election.Observation{}, fmt.Errorf("electiontest: not observed; seen %s: %w", seen, ctx.Err())
		}
	}
}

// AwaitCount waits until at least n observations of ev were recorded.
func (r *Recorder) AwaitCount(ctx context.Context, ev election.Event, n int) error {
	for {
		r.mu.Lock()
		got, ch := r.count(ev), r.change
		r.mu.Unlock()
		if got >= n {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("electiontest: %d observations of %s, want %d: %w", got, ev, n, ctx.Err())
		}
	}
}

// Count returns how many observations of ev were recorded.
func (r *Recorder) Count(ev election.Event) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.count(ev)
}

func (r *Recorder) count(ev election.Event) int {
	n := 0
	for _, o := range r.obs {
		if o.Event == ev {
			n++
		}
	}
	return n
}

// Events returns the events recorded so far, each as "eventtype reason".
func (r *Recorder) Events() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events)
}
