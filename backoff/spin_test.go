package backoff

import (
	"context"
	"errors"
	"io"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
)

// TestLoopsDoNotSpin gives every loop of the package an adversary that
// answers at once (nil, an error, EOF, a hint of zero or less) and counts
// its calls in an hour of the bubble's fake time. A spinning loop never
// lets that clock move, so each adversary turns permanent after far more
// calls than any bound below, and the count shows it.
func TestLoopsDoNotSpin(t *testing.T) {
	const hour = time.Hour
	// Retry's waits grow from 100 ms by 1.5 to 30 s with ±20% jitter:
	// about 15 calls to reach the cap, then at most one per 24 s.
	retryBound := 15 + int(hour/(24*time.Second)) + 1
	cases := []struct {
		name     string
		loop     func(ctx context.Context, call func() error) error
		answer   func() error
		min, max int
	}{
		{"Retry/error", retry, func() error { return errBoom }, 100, retryBound},
		{"Retry/EOF", retry, func() error { return io.EOF }, 100, retryBound},
		{"Retry/hint 0", retry, func() error { return RetryAfter(errBoom, 0) }, 100, retryBound},
		{"Retry/hint -1s", retry, func() error { return RetryAfter(errBoom, -time.Second) }, 100, retryBound},
		// A hint above the 1 min cap waits from [cap/1.2, cap].
		{"Retry/hint above cap", retry, func() error { return RetryAfter(errBoom, 24*hour) }, 60, 73},
		{"Every/nil", every, func() error { return nil }, 30, 61},
		{"Every/error", every, func() error { return errBoom }, 30, 61},
		{"Every/hint 0", every, func() error { return RetryAfter(errBoom, 0) }, 30, 61},
		// Every with WithFailureBackoff(30 s) at a 1 min interval: the cap
		// is the interval, so failures wait 1 min to 1.2 min.
		{"Every+backoff/error", everyBackoff, func() error { return errBoom }, 45, 61},
		{"Every+backoff/hint 0", everyBackoff, func() error { return RetryAfter(errBoom, 0) }, 45, 61},
		{"Every+backoff/nil", everyBackoff, func() error { return nil }, 30, 61},
		{"Poll/not done", poll(false), func() error { return nil }, 3000, 3601},
		{"Poll/error", poll(false), func() error { return errBoom }, 3000, 3601},
		{"Poll/hint 0", poll(false), func() error { return RetryAfter(errBoom, 0) }, 3000, 3601},
		{"Poll/hint -1s", poll(false), func() error { return RetryAfter(errBoom, -time.Second) }, 3000, 3601},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(t.Context(), hour)
				defer cancel()
				calls := 0
				_ = tc.loop(ctx, func() error {
					calls++
					if calls > 100_000 {
						return Permanent(errors.New("spinning"))
					}
					return tc.answer()
				})
				require.GreaterOrEqual(t, calls, tc.min, "calls in an hour")
				require.LessOrEqual(t, calls, tc.max, "calls in an hour")
			})
		})
	}
}

func retry(ctx context.Context, call func() error) error {
	return Retry(ctx, func(context.Context) error { return call() })
}

func every(ctx context.Context, call func() error) error {
	return Every(ctx, time.Minute, 0, func(context.Context) error { return call() })
}

func everyBackoff(ctx context.Context, call func() error) error {
	return Every(ctx, time.Minute, 0, func(context.Context) error { return call() }, WithFailureBackoff(30*time.Second))
}

// poll polls every second with no timeout; the adversary is never done.
func poll(done bool) func(ctx context.Context, call func() error) error {
	return func(ctx context.Context, call func() error) error {
		return Poll(ctx, time.Second, 0, func(context.Context) (bool, error) { return done, call() })
	}
}
