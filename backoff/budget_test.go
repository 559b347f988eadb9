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
)

// TestRetryRequestBudget holds the budget every server loop built on Retry
// inherits: an operation that fails at once, for good, is called at most
// once per second from 30 s to 90 s (with the defaults, at most once per
// 24 s; with the 5 s cap nodestatus uses, once per 3.3 s), and two loops
// that started failing together call at different instants. Each answer
// a server can give for good is an error to Retry; a hint of 0 or less
// (a 429 or ServerTimeout with Retry-After 0) gets the same waits, and so
// does a positive hint shorter than the backoff: a hint is a minimum, so a
// server answering "Retry-After: 1" for good costs what any error costs
// (it cost 60 calls a minute when a hint replaced the backoff).
func TestRetryRequestBudget(t *testing.T) {
	for _, tc := range []struct {
		name   string
		opts   []RetryOption
		answer error
		most   int // calls from 30 s to 90 s
	}{
		{"defaults, an error", nil, errBoom, 3},
		{"defaults, Retry-After 0", nil, RetryAfter(errBoom, 0), 3},
		// Hints raise the short early waits to 1 s, so fewer calls come in
		// the first 30 s and the cap is reached a little later.
		{"defaults, Retry-After 1s", nil, RetryAfter(errBoom, time.Second), 4},
		{"defaults, Retry-After 40s", nil, RetryAfter(errBoom, 40*time.Second), 2},
		{"5 s cap, an error", []RetryOption{WithInitialInterval(200 * time.Millisecond), WithMaxInterval(5 * time.Second * 5 / 6)}, errBoom, 18},
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
						_ = Retry(ctx, func(context.Context) error {
							mu.Lock()
							defer mu.Unlock()
							calls[i] = append(calls[i], time.Since(start))
							if len(calls[i]) > 10_000 {
								return Permanent(errors.New("spinning"))
							}
							return tc.answer
						}, tc.opts...)
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
					require.LessOrEqual(t, len(l), tc.most, "loop %d: calls from 30 s to 90 s", i)
					require.NotEmpty(t, l, "loop %d: still retried", i)
					late = append(late, l)
				}
				require.False(t, slices.Equal(late[0], late[1]), "two loops that failed together call at the same instants: no jitter")
			})
		})
	}
}
