package backoff

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"
)

// quarter is a source that always draws 0.25: every jittered wait of a
// loop given it is known exactly, and differs from both ends of its range.
func quarter() float64 { return 0.25 }

// pauses runs loop in a bubble and returns the simulated time between its
// calls of the operation, until it made calls of them.
func pauses(t *testing.T, calls int, loop func(ctx context.Context, op func(context.Context) error) error) []time.Duration {
	t.Helper()
	var got []time.Duration
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		last := time.Now()
		n := 0
		_ = loop(ctx, func(context.Context) error {
			if n > 0 {
				got = append(got, time.Since(last))
			}
			last = time.Now()
			if n++; n == calls {
				cancel()
			}
			return errors.New("fails")
		})
	})
	return got
}

// WithRand is the source of Retry's spread of the exponential waits, of
// its hinted waits, and of Every's waits: a fixed draw gives the exact
// waits.
func TestWithRandDrawsEveryWait(t *testing.T) {
	t.Run("Retry", func(t *testing.T) {
		got := pauses(t, 4, func(ctx context.Context, op func(context.Context) error) error {
			return Retry(ctx, op, WithRand(quarter))
		})
		// Each base b spread over [0.8b, 1.2b] (+1ns): 0.8b + 0.25×(0.4b+1ns).
		want := []time.Duration{90 * time.Millisecond, 135 * time.Millisecond, 202500 * time.Microsecond}
		assertPauses(t, got, want)
	})
	t.Run("Retry hinted", func(t *testing.T) {
		got := pauses(t, 3, func(ctx context.Context, op func(context.Context) error) error {
			return Retry(ctx, func(ctx context.Context) error { return RetryAfter(op(ctx), time.Second) }, WithRand(quarter))
		})
		// A hint of 1s is jittered upwards only: 1s + 0.25×0.2s.
		assertPauses(t, got, []time.Duration{1050 * time.Millisecond, 1050 * time.Millisecond})
	})
	t.Run("Every", func(t *testing.T) {
		got := pauses(t, 3, func(ctx context.Context, op func(context.Context) error) error {
			return Every(ctx, time.Second, 0.5, op, WithRand(quarter))
		})
		assertPauses(t, got, []time.Duration{1125 * time.Millisecond, 1125 * time.Millisecond})
	})
	t.Run("Renewal", func(t *testing.T) {
		r := Renewal{Initial: time.Second, Multiplier: 2, Jitter: 0.5, Rand: quarter}
		if got, want := r.Pause(2, time.Hour), 2250*time.Millisecond; got != want {
			t.Errorf("Pause(2) = %v, want %v", got, want)
		}
	})
}

func assertPauses(t *testing.T, got, want []time.Duration) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("pauses %v, want %v", got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("pauses %v, want %v", got, want)
		}
	}
}
