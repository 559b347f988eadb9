package backoff

import (
	"context"
	"errors"
	"math"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	clocktesting "k8s.io/utils/clock/testing"
)

func TestEveryImmediateAndMeasuredFromEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fc := clocktesting.NewFakeClock(epoch)
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		var running, maxRunning atomic.Int32
		r := &recorder{fc: fc}
		r.next = func(n int) error {
			cur := running.Add(1)
			defer running.Add(-1)
			if cur > maxRunning.Load() {
				maxRunning.Store(cur)
			}
			fc.Step(3 * time.Second) // the run itself takes 3s
			if n == 3 {
				cancel()
			}
			return nil
		}
		done := async(func() error { return Every(ctx, 10*time.Second, 0, r.op, WithClock(fc)) })
		waitFor(t, "the first run", func() bool { return r.count() == 1 })
		require.Equal(t, secs(0), r.times(), "the first run happens at once")
		stepExactly(t, fc, done, 10*time.Second)
		stepExactly(t, fc, done, 10*time.Second)
		err := result(t, done)
		require.NoError(t, err, "Every returns nil when its context ends")
		// Each run starts 10s after the previous one ended.
		require.Equal(t, secs(0, 13, 26), r.times())
		require.Equal(t, int32(1), maxRunning.Load(), "runs never overlap")
		require.False(t, fc.HasWaiters())
	})
}

func TestEveryDelayedStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fc := clocktesting.NewFakeClock(epoch)
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		r := &recorder{fc: fc, next: func(int) error { return nil }}
		done := async(func() error { return Every(ctx, 10*time.Second, 0, r.op, WithClock(fc), WithDelayedStart()) })
		stepExactly(t, fc, done, 10*time.Second)
		stepExactly(t, fc, done, 10*time.Second)
		awaitWaiter(t, fc, done)
		cancel()
		require.NoError(t, result(t, done))
		require.Equal(t, secs(10, 20), r.times())
		require.False(t, fc.HasWaiters())
	})
}

func TestEveryCanceledDuringDelayedStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fc := clocktesting.NewFakeClock(epoch)
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		r := &recorder{fc: fc, next: func(int) error { return nil }}
		done := async(func() error { return Every(ctx, time.Second, 0, r.op, WithClock(fc), WithDelayedStart()) })
		awaitWaiter(t, fc, done)
		cancel()
		require.NoError(t, result(t, done))
		require.Zero(t, r.count())
		require.False(t, fc.HasWaiters())
	})
}

func TestEveryPermanentStops(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fc := clocktesting.NewFakeClock(epoch)
		logs := newCapture(fc, 0)
		stop := errors.New("stop")
		r := &recorder{fc: fc, next: func(n int) error {
			if n == 3 {
				return Permanent(stop)
			}
			return nil
		}}
		done := async(func() error { return Every(logs.ctx(t.Context()), time.Second, 0, r.op, WithClock(fc)) })
		stepExactly(t, fc, done, time.Second)
		stepExactly(t, fc, done, time.Second)
		err := result(t, done)
		require.True(t, err == stop, "the inner error is returned, got %v", err)
		require.Equal(t, 3, r.count())
		require.False(t, fc.HasWaiters())
		entries := logs.all()
		require.Len(t, entries, 1)
		require.Equal(t, -1, entries[0].level)
		require.True(t, entries[0].err == stop)
	})
}

func TestEveryErrorsLoggedRateLimited(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fc := clocktesting.NewFakeClock(epoch)
		logs := newCapture(fc, 0)
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		r := &recorder{fc: fc, next: func(n int) error {
			switch {
			case n <= 25: // runs at 0s..24s fail
				return errBoom
			case n == 26: // 25s succeeds
				return nil
			case n <= 30: // 26s..29s fail again
				return errBoom
			}
			cancel()
			return nil
		}}
		done := async(func() error { return Every(logs.ctx(ctx), time.Second, 0, r.op, WithClock(fc), WithName("probe")) })
		for range 30 {
			stepExactly(t, fc, done, time.Second)
		}
		require.NoError(t, result(t, done))
		require.Equal(t, 31, r.count(), "the loop goes on after errors")
		// No quiet period by default; then at most once per 10s. The failures at
		// 26s..29s are within 10s of the one logged at 20s.
		require.Equal(t, secs(0, 10, 20), logs.at("Periodic run failed", 0))
		require.Equal(t, secs(25), logs.at("Operation succeeded after failures", 0))
		require.Len(t, logs.all(), 4)
		require.Equal(t, "probe", logs.all()[0].kv["operation"])
	})
}

func TestEveryQuietPeriodOption(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fc := clocktesting.NewFakeClock(epoch)
		logs := newCapture(fc, 0)
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		r := &recorder{fc: fc, next: func(n int) error {
			if n == 8 {
				cancel()
			}
			return errBoom
		}}
		done := async(func() error {
			return Every(logs.ctx(ctx), time.Second, 0, r.op, WithClock(fc), WithQuietPeriod(5*time.Second))
		})
		for range 7 {
			stepExactly(t, fc, done, time.Second)
		}
		require.NoError(t, result(t, done), "an error from a canceled run ends the loop, which returns nil")
		require.Equal(t, secs(5), logs.at("Periodic run failed", 0))
	})
}

func TestEveryJitterBounds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fc := clocktesting.NewFakeClock(epoch)
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		r := &recorder{fc: fc, next: func(int) error { return nil }}
		done := async(func() error { return Every(ctx, 10*time.Second, 0.5, r.op, WithClock(fc)) })
		for i := range 20 {
			// The wait lies in [10s, 15s).
			awaitWaiter(t, fc, done)
			fc.Step(10*time.Second - 1)
			require.True(t, fc.HasWaiters(), "wait shorter than the interval")
			fc.Step(5 * time.Second)
			waitFor(t, "the next run", func() bool { return r.count() == i+2 })
		}
		awaitWaiter(t, fc, done)
		cancel()
		require.NoError(t, result(t, done))
	})
}

func TestJitterUp(t *testing.T) {
	require.Equal(t, time.Second, jitterUp(nil, time.Second, 0))
	seen := map[time.Duration]bool{}
	for range 1000 {
		d := jitterUp(nil, time.Second, 0.25)
		require.GreaterOrEqual(t, d, time.Second)
		require.LessOrEqual(t, d, 1250*time.Millisecond)
		seen[d] = true
	}
	require.Greater(t, len(seen), 1)
	require.Equal(t, time.Duration(math.MaxInt64), jitterUp(nil, math.MaxInt64-1, 1), "saturates")
}

func TestEveryBadInput(t *testing.T) {
	tests := map[string]struct {
		interval time.Duration
		jitter   float64
		opts     []EveryOption
	}{
		"zero interval":        {0, 0, nil},
		"negative interval":    {-time.Second, 0, nil},
		"negative jitter":      {time.Second, -0.1, nil},
		"jitter above 1":       {time.Second, 1.1, nil},
		"jitter NaN":           {time.Second, math.NaN(), nil},
		"bad option":           {time.Second, 0, []EveryOption{WithLogInterval(-1)}},
		"zero failure cap":     {time.Second, 0, []EveryOption{WithFailureBackoff(0)}},
		"negative failure cap": {time.Second, 0, []EveryOption{WithFailureBackoff(-time.Second)}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			calls := 0
			err := Every(t.Context(), tc.interval, tc.jitter, func(context.Context) error { calls++; return nil }, tc.opts...)
			require.ErrorIs(t, err, ErrInvalidOption)
			require.Zero(t, calls)
		})
	}
	err := Every(t.Context(), time.Second, 0, nil)
	require.ErrorIs(t, err, ErrInvalidOption)
	require.ErrorContains(t, err, "nil function")
}

func TestEveryContextDoneBeforeStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		calls := 0
		err := Every(ctx, time.Second, 0, func(context.Context) error { calls++; return nil })
		require.NoError(t, err)
		require.Zero(t, calls)
	})
}
