package backoff

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	clocktesting "k8s.io/utils/clock/testing"
)

// poller is a condition that records the bubble-clock offset of each check
// and answers what next says for the n-th check (1-based).
type poller struct {
	start time.Time
	next  func(n int) (bool, error)
	at    []time.Duration
}

func newPoller(next func(n int) (bool, error)) *poller {
	return &poller{start: time.Now(), next: next}
}

func (p *poller) cond(context.Context) (bool, error) {
	p.at = append(p.at, time.Since(p.start))
	return p.next(len(p.at))
}

func doneAfter(n int) func(int) (bool, error) {
	return func(k int) (bool, error) { return k > n, nil }
}

func TestPollDoneAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		logs := newCapture(nil, 1)
		p := newPoller(doneAfter(0))
		require.NoError(t, Poll(logs.ctx(t.Context()), time.Second, time.Minute, p.cond))
		require.Equal(t, secs(0), p.at)
		require.Empty(t, logs.all(), "a condition that holds at once logs nothing")
	})
}

func TestPollConstantInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		logs := newCapture(nil, 0)
		p := newPoller(doneAfter(4))
		require.NoError(t, Poll(logs.ctx(t.Context()), 2*time.Second, 0, p.cond))
		require.Equal(t, secs(0, 2, 4, 6, 8), p.at, "no jitter and no growth by default")
		require.Empty(t, logs.all(), "not done is not a failure")
	})
}

func TestPollGrowsToMax(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newPoller(doneAfter(5))
		err := Poll(t.Context(), time.Second, 0, p.cond, WithMultiplier(2), WithMaxInterval(5*time.Second))
		require.NoError(t, err)
		require.Equal(t, secs(0, 1, 3, 7, 12, 17), p.at)
	})
}

func TestPollJitter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newPoller(doneAfter(40))
		require.NoError(t, Poll(t.Context(), time.Second, 0, p.cond, WithJitter(0.5)))
		distinct := map[time.Duration]bool{}
		for i := 1; i < len(p.at); i++ {
			w := p.at[i] - p.at[i-1]
			require.GreaterOrEqual(t, w, 500*time.Millisecond)
			require.LessOrEqual(t, w, 1500*time.Millisecond)
			distinct[w] = true
		}
		require.Greater(t, len(distinct), 1)
	})
}

func TestPollDelayedStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newPoller(doneAfter(1))
		require.NoError(t, Poll(t.Context(), 3*time.Second, 0, p.cond, WithDelayedStart()))
		require.Equal(t, secs(3, 6), p.at)
	})
}

// The timeout is measured from the first check; the last wait is cut so
// that the condition is checked once more exactly at the deadline.
func TestPollTimeoutChecksAtDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newPoller(doneAfter(100))
		err := Poll(t.Context(), 4*time.Second, 10*time.Second, p.cond, WithName("lb ready"))
		require.ErrorIs(t, err, ErrGaveUp)
		require.ErrorContains(t, err, `"lb ready": not done after 4 checks in 10s`)
		require.Equal(t, secs(0, 4, 8, 10), p.at)

		// Done at the deadline is done.
		p = newPoller(doneAfter(3))
		require.NoError(t, Poll(t.Context(), 4*time.Second, 10*time.Second, p.cond))
		require.Equal(t, secs(0, 4, 8, 10), p.at)
	})
}

func TestPollTimeoutWrapsLastError(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newPoller(func(n int) (bool, error) { return false, fmt.Errorf("check %d: %w", n, errBoom) })
		err := Poll(t.Context(), time.Second, 3*time.Second, p.cond)
		require.ErrorIs(t, err, ErrGaveUp)
		require.ErrorIs(t, err, errBoom)
		require.ErrorContains(t, err, "check 4: boom")
	})
}

// Transient errors are retried and logged quietly, as Retry logs them; a
// result of "not done" is neither.
func TestPollTransientErrorsRetriedQuietly(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		logs := newCapture(nil, 0)
		p := newPoller(func(n int) (bool, error) {
			switch {
			case n <= 30:
				return false, errBoom
			case n <= 35:
				return false, nil
			}
			return true, nil
		})
		err := Poll(logs.ctx(t.Context()), time.Second, 0, p.cond, WithName("lb"))
		require.NoError(t, err)
		require.Len(t, p.at, 36)
		failed := logs.at("Condition check failed, will poll again", 0)
		require.Equal(t, secs(2, 12, 22), failed, "quiet for 2s, then once per 10s")
		require.Len(t, logs.at("Operation succeeded after failures", 0), 1, "recovery logged once")
	})
}

func TestPollPermanentEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		inner := errors.New("load balancer deleted")
		p := newPoller(func(n int) (bool, error) {
			if n == 3 {
				return true, Permanent(inner) // the error wins over done
			}
			return false, nil
		})
		err := Poll(t.Context(), time.Second, 0, p.cond)
		require.True(t, err == inner, "got %#v", err)
		require.Len(t, p.at, 3)
	})
}

func TestPollHonoursHints(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := newPoller(func(n int) (bool, error) {
			switch n {
			case 1:
				return false, RetryAfter(errBoom, 7*time.Second)
			case 2:
				return false, RetryAfter(errBoom, 0) // asks for nothing: the interval
			}
			return n > 3, nil
		})
		require.NoError(t, Poll(t.Context(), time.Second, 0, p.cond))
		require.Equal(t, secs(0, 7, 8, 9), p.at)
	})
}

func TestPollContextEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 5500*time.Millisecond)
		defer cancel()
		p := newPoller(doneAfter(100))
		err := Poll(ctx, time.Second, 0, p.cond, WithName("lb"))
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.ErrorContains(t, err, `"lb": not done after 6 checks`)
		require.Len(t, p.at, 6)

		ctx, cancel = context.WithTimeout(t.Context(), 1500*time.Millisecond)
		defer cancel()
		p = newPoller(func(int) (bool, error) { return false, errBoom })
		err = Poll(ctx, time.Second, 0, p.cond)
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.ErrorIs(t, err, errBoom, "the last error is wrapped")

		ctx, cancel = context.WithCancel(t.Context())
		cancel()
		calls := 0
		err = Poll(ctx, time.Second, 0, func(context.Context) (bool, error) { calls++; return true, nil })
		require.True(t, err == context.Canceled, "plain ctx.Err() before the first check, got %v", err)
		require.Zero(t, calls)
	})
}

func TestPollInjectedClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fc := clocktesting.NewFakeClock(epoch)
		checks := 0
		done := async(func() error {
			return Poll(t.Context(), time.Second, 3*time.Second, func(context.Context) (bool, error) {
				checks++
				return false, nil
			}, WithClock(fc))
		})
		stepExactly(t, fc, done, time.Second)
		stepExactly(t, fc, done, time.Second)
		stepExactly(t, fc, done, time.Second)
		require.ErrorIs(t, result(t, done), ErrGaveUp)
		require.Equal(t, 4, checks)
		require.False(t, fc.HasWaiters(), "the timer is released")
	})
}

func TestPollBadInput(t *testing.T) {
	cond := func(context.Context) (bool, error) { return true, nil }
	for name, err := range map[string]error{
		"zero interval":    Poll(t.Context(), 0, 0, cond),
		"negative timeout": Poll(t.Context(), time.Second, -1, cond),
		"nil condition":    Poll(t.Context(), time.Second, 0, nil),
		"bad option":       Poll(t.Context(), time.Second, 0, cond, WithJitter(2)),
		"max below zero":   Poll(t.Context(), time.Second, 0, cond, WithMaxInterval(-1)),
	} {
		require.ErrorIs(t, err, ErrInvalidOption, name)
	}
}
