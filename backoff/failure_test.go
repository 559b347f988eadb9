package backoff

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	clocktesting "k8s.io/utils/clock/testing"
)

// A positive hint is a minimum, never a replacement: a server that says
// "1 s" to a loop already at an 8 s backoff does not bring the next
// attempt forward, and a hint longer than the backoff is waited out.
func TestRetryAfterHintIsAMinimum(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fc := clocktesting.NewFakeClock(epoch)
		r := &recorder{fc: fc, next: func(n int) error {
			switch {
			case n <= 3:
				return errBoom // waits 1, 2, 4 s
			case n == 4:
				return RetryAfter(errBoom, time.Second) // the backoff is 8 s: 8 s
			case n == 5:
				return RetryAfter(errBoom, 30*time.Second) // the backoff is 16 s: 30 s
			}
			return nil
		}}
		done := async(func() error {
			return Retry(t.Context(), r.op, WithClock(fc), WithJitter(0), WithInitialInterval(time.Second), WithMultiplier(2))
		})
		for _, d := range secs(1, 2, 4, 8, 30) {
			stepExactly(t, fc, done, d)
		}
		require.NoError(t, result(t, done))
		require.Equal(t, secs(0, 1, 3, 7, 15, 45), r.times())
	})
}

// Poll takes a hint as a minimum too.
func TestPollHintIsAMinimum(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newPoller(func(n int) (bool, error) {
			switch n {
			case 4:
				return false, RetryAfter(errBoom, time.Second) // the wait is 8 s: 8 s
			case 5:
				return false, RetryAfter(errBoom, 20*time.Second) // the wait is 16 s: 20 s
			}
			return n > 5, nil
		})
		require.NoError(t, Poll(t.Context(), time.Second, 0, p.cond, WithMultiplier(2), WithMaxInterval(time.Hour)))
		require.Equal(t, secs(0, 1, 3, 7, 15, 35), p.at)
	})
}

// everyWaits runs Every in the bubble over the answers given (nil for a
// success) and returns the waits between its runs.
func everyWaits(t *testing.T, interval time.Duration, answers []error, opts ...EveryOption) []time.Duration {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	start := time.Now()
	var at []time.Duration
	err := Every(ctx, interval, 0, func(context.Context) error {
		at = append(at, time.Since(start))
		if len(at) > len(answers) {
			cancel()
			return nil
		}
		return answers[len(at)-1]
	}, opts...)
	require.NoError(t, err)
	var waits []time.Duration
	for i := 1; i < len(at); i++ {
		waits = append(waits, at[i]-at[i-1])
	}
	return waits
}

// With WithFailureBackoff, each failure in a row grows Every's wait by half
// with ±20% jitter, never below the interval; a success returns to the
// interval at once, and the next failure starts again from 1.5 × interval.
func TestEveryFailureBackoffGrowsAndResets(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		answers := []error{errBoom, errBoom, errBoom, nil, errBoom, nil}
		for range 50 {
			w := everyWaits(t, time.Second, answers, WithFailureBackoff(3*time.Second))
			require.Len(t, w, len(answers))
			within := func(i int, base time.Duration) {
				lo, hi := max(time.Second, base*8/10), base*12/10
				require.True(t, w[i] >= lo && w[i] <= hi, "wait %d = %v, want within [%v, %v]; waits %v", i, w[i], lo, hi, w)
			}
			within(0, 1500*time.Millisecond) // after the 1st failure
			within(1, 2250*time.Millisecond) // after the 2nd
			within(2, 3*time.Second)         // the cap
			require.Equal(t, time.Second, w[3], "a success returns to the interval")
			within(4, 1500*time.Millisecond) // reset: from the start again
			require.Equal(t, time.Second, w[5])
		}
		// Without the option a failure waits the interval, as documented.
		w := everyWaits(t, time.Second, answers)
		require.Equal(t, slices.Repeat([]time.Duration{time.Second}, len(answers)), w)
	})
}

// With WithFailureBackoff a positive hint is a minimum; zero asks for
// nothing. Without it Every ignores hints.
func TestEveryFailureBackoffHonoursHints(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		answers := []error{RetryAfter(errBoom, 10*time.Second), RetryAfter(errBoom, 0), nil}
		w := everyWaits(t, time.Second, answers, WithFailureBackoff(30*time.Second))
		require.GreaterOrEqual(t, w[0], 10*time.Second)
		require.LessOrEqual(t, w[0], 12*time.Second)
		require.GreaterOrEqual(t, w[1], 1800*time.Millisecond, "the second failure's backoff (2.25 s ±20%)")
		require.LessOrEqual(t, w[1], 2700*time.Millisecond)
		require.Equal(t, time.Second, w[2])
		w = everyWaits(t, time.Second, answers)
		require.Equal(t, []time.Duration{time.Second, time.Second, time.Second}, w)
	})
}

// TestEveryFailureBackoffBudget holds the request budget for a loop on
// Every that talks to a server: at a 100 ms interval, with the 30 s cap
// checkpoint.PollSource uses, an answer that fails for good (any error, a
// 429 saying 1 s) is met at most 3 or 4 times from 30 s to 90 s, and two
// loops that failed together call at different instants. Without the
// growth the same loop calls 600 times in that minute.
func TestEveryFailureBackoffBudget(t *testing.T) {
	for _, tc := range []struct {
		name   string
		answer error
		most   int // calls from 30 s to 90 s
	}{
		{"an error", errBoom, 3},
		{"Retry-After 0", RetryAfter(errBoom, 0), 3},
		// Hints raise the short early waits to 1 s: the cap comes later.
		{"Retry-After 1s", RetryAfter(errBoom, time.Second), 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(t.Context(), 90*time.Second)
				defer cancel()
				start := time.Now()
				var mu sync.Mutex
				calls := make([][]time.Duration, 2)
				var wg sync.WaitGroup
				for i := range calls {
					wg.Go(func() {
						_ = Every(ctx, 100*time.Millisecond, 0.1, func(context.Context) error {
							mu.Lock()
							defer mu.Unlock()
							calls[i] = append(calls[i], time.Since(start))
							if len(calls[i]) > 10_000 {
								return Permanent(errors.New("spinning"))
							}
							return tc.answer
						}, WithFailureBackoff(30*time.Second))
					})
				}
				wg.Wait()
				var late [][]time.Duration
				for i, c := range calls {
					var l []time.Duration
					for _, d := range c {
						if d >= 30*time.Second {
							l = append(l, d)
						}
					}
					t.Logf("loop %d: %d calls in the first 30 s, %d from 30 s to 90 s", i, len(c)-len(l), len(l))
					require.LessOrEqual(t, len(c)-len(l), 15, "loop %d: calls in the first 30 s", i)
					require.LessOrEqual(t, len(l), tc.most, "loop %d: calls from 30 s to 90 s", i)
					require.NotEmpty(t, l, "loop %d: still called", i)
					late = append(late, l)
				}
				require.False(t, slices.Equal(late[0], late[1]), "two loops that failed together call at the same instants: no jitter")
			})
		})
	}
}
