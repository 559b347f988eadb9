package checkpoint_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/reconkit/reconkit/checkpoint"
)

// The loops of the package against adversaries that answer at once: each
// test counts calls in an hour of fake time.

// stepHour advances clk by an hour, five seconds at a time, letting every
// goroutine of the bubble settle after each step.
func stepHour(clk *clocktesting.FakeClock) {
	for range 720 {
		synctest.Wait()
		clk.Step(5 * time.Second)
	}
	synctest.Wait()
}

// TestTrialChecksDoNotSpin: the trial loop checks once per CheckInterval,
// whether the probe passes at once, fails at once (rolling back) or the
// record of a graduation fails at once at every check.
func TestTrialChecksDoNotSpin(t *testing.T) {
	t.Run("probe passes at once", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			ctx := context.Background()
			h := newHarness(t, &checkpoint.MemStore{}, clocktesting.NewFakeClock(t0))
			_, err := h.ctrl.Bootstrap(ctx)
			require.NoError(t, err)
			_, err = h.ctrl.Assign(ctx, []byte("level=3"), src("a", "1"))
			require.NoError(t, err)
			h.run()
			defer h.stop()
			stepHour(h.clock)
			// A check a minute until the trial of ten passes, then none
			// needs the probe.
			require.Equal(t, int(trial/interval)+1, h.probeCount())
			h.requirePhase(checkpoint.PhaseLastKnownGood, "a_1")
		})
	})
	t.Run("graduation record fails at once", func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			ctx := context.Background()
			store := &countingStore{}
			h := newHarness(t, store, clocktesting.NewFakeClock(t0))
			_, err := h.ctrl.Bootstrap(ctx)
			require.NoError(t, err)
			_, err = h.ctrl.Assign(ctx, []byte("level=3"), src("a", "1"))
			require.NoError(t, err)
			store.setFailing(true)
			h.run()
			defer h.stop()
			before := store.setStates.Load()
			stepHour(h.clock)
			tries := int(store.setStates.Load() - before)
			require.LessOrEqual(t, tries, 60-int(trial/interval)+1, "one try per check once the trial passed")
			require.Greater(t, tries, 40)
			h.requirePhase(checkpoint.PhaseTrial, "a_1")
		})
	})
}

// countingStore counts SetState calls, failing them at once while failing
// is set.
type countingStore struct {
	flakyStore
	setStates atomic.Int64
}

func (s *countingStore) SetState(ctx context.Context, st checkpoint.State) error {
	s.setStates.Add(1)
	return s.flakyStore.SetState(ctx, st)
}

// TestPollSourceDoesNotSpin: PollSource fetches once per Interval (plus up
// to 10%) whatever Fetch answers at once; a failing Fetch is retried no
// sooner than Interval either, and less often as failures go on.
func TestPollSourceDoesNotSpin(t *testing.T) {
	for name, answer := range map[string]error{
		"payload":          nil,
		"nothing assigned": fmt.Errorf("no such object: %w", checkpoint.ErrNotFound),
		"EOF":              io.EOF,
		"error":            errors.New("connection refused"),
	} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				clk := clocktesting.NewFakeClock(t0)
				var fetches atomic.Int64
				ps := &checkpoint.PollSource{Interval: time.Minute, Clock: clk,
					Fetch: func(context.Context) ([]byte, checkpoint.Source, error) {
						fetches.Add(1)
						return []byte("level=3"), src("a", "1"), answer
					}}
				ctx, cancel := context.WithCancel(context.Background())
				done := make(chan error, 1)
				go func() { done <- ps.Watch(ctx, func(context.Context, []byte, checkpoint.Source) {}) }()
				stepHour(clk)
				cancel()
				require.NoError(t, <-done)
				n := int(fetches.Load())
				require.LessOrEqual(t, n, 61)
				if answer == nil || errors.Is(answer, checkpoint.ErrNotFound) {
					require.GreaterOrEqual(t, n, 50)
				} else {
					require.GreaterOrEqual(t, n, 25, "retried at 1.5 to 1.8 minutes")
				}
			})
		})
	}
}

// TestPollSourceBacksOffPersistentErrors: with a short Interval (100 ms),
// a Fetch that fails for good (a GET answered 500, 403 or a refused
// connection: to PollSource they are all an error) is retried less and
// less often: from 30 s to 90 s at most one request per 24 s, not ten a
// second. A success returns to Interval.
func TestPollSourceBacksOffPersistentErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := clocktesting.NewFakeClock(t0)
		var mu sync.Mutex
		var at []time.Duration
		var failing atomic.Bool
		failing.Store(true)
		ps := &checkpoint.PollSource{Interval: 100 * time.Millisecond, Clock: clk,
			Fetch: func(context.Context) ([]byte, checkpoint.Source, error) {
				mu.Lock()
				at = append(at, clk.Since(t0))
				mu.Unlock()
				if failing.Load() {
					return nil, checkpoint.Source{}, errors.New("the server is currently unable to handle the request")
				}
				return []byte("level=3"), src("a", "1"), nil
			}}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- ps.Watch(ctx, func(context.Context, []byte, checkpoint.Source) {}) }()
		count := func(from, to time.Duration) int {
			mu.Lock()
			defer mu.Unlock()
			n := 0
			for _, a := range at {
				if a >= from && a < to {
					n++
				}
			}
			return n
		}
		for range 900 {
			synctest.Wait()
			clk.Step(100 * time.Millisecond)
		}
		synctest.Wait()
		late := count(30*time.Second, 90*time.Second)
		t.Logf("%d fetches in the first 30 s, %d from 30 s to 90 s", count(0, 30*time.Second), late)
		require.LessOrEqual(t, late, 4, "one fetch per 24 s at most, 30 s into the failure")
		require.GreaterOrEqual(t, late, 1, "still retried")

		failing.Store(false)
		for range 400 { // up to 36 s for the pending retry, then 4 s
			synctest.Wait()
			clk.Step(100 * time.Millisecond)
		}
		synctest.Wait()
		require.GreaterOrEqual(t, count(126*time.Second, 130*time.Second), 20, "back to Interval after a success")
		cancel()
		require.NoError(t, <-done)
	})
}

// TestSourceReturningAtOnce: a source whose Watch returns nil at once is
// not called again in a loop; Run goes on checking trials.
func TestSourceReturningAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := clocktesting.NewFakeClock(t0)
		var watches atomic.Int64
		ctrl, err := checkpoint.New(checkpoint.Config[agentConfig]{
			Store: &checkpoint.MemStore{}, Parse: parseAgent, Validate: validateAgent, Local: agentConfig{Level: 1},
			TrialDuration: trial, CheckInterval: interval, Clock: clk,
			Source: sourceFunc(func(context.Context, func(context.Context, []byte, checkpoint.Source)) error {
				watches.Add(1)
				return nil
			}),
		})
		require.NoError(t, err)
		_, err = ctrl.Bootstrap(context.Background())
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- ctrl.Run(ctx) }()
		stepHour(clk)
		require.Empty(t, done, "Run goes on")
		cancel()
		require.NoError(t, <-done)
		require.Equal(t, int64(1), watches.Load())
	})
}

type sourceFunc func(context.Context, func(context.Context, []byte, checkpoint.Source)) error

func (f sourceFunc) Watch(ctx context.Context, assign func(context.Context, []byte, checkpoint.Source)) error {
	return f(ctx, assign)
}
