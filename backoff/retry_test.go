package backoff

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	cbackoff "github.com/cenkalti/backoff/v4"
	cbackoffv5 "github.com/cenkalti/backoff/v5"
	"github.com/stretchr/testify/require"
	clocktesting "k8s.io/utils/clock/testing"
)

var errBoom = errors.New("boom")

// failTimes returns an op result function that fails n times, then succeeds.
func failTimes(n int) func(int) error {
	return func(call int) error {
		if call <= n {
			return fmt.Errorf("attempt %d: %w", call, errBoom)
		}
		return nil
	}
}

func TestRetrySucceedsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fc := clocktesting.NewFakeClock(epoch)
		logs := newCapture(fc, 1)
		r := &recorder{fc: fc, next: failTimes(0)}
		require.NoError(t, Retry(logs.ctx(t.Context()), r.op, WithClock(fc)))
		require.Equal(t, secs(0), r.times())
		require.False(t, fc.HasWaiters())
		require.Empty(t, logs.all(), "a first-try success logs nothing")
	})
}

func TestRetryWaitsGrowAndAreCapped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fc := clocktesting.NewFakeClock(epoch)
		r := &recorder{fc: fc, next: failTimes(6)}
		done := async(func() error {
			return Retry(t.Context(), r.op, WithClock(fc), WithJitter(0),
				WithInitialInterval(time.Second), WithMultiplier(2), WithMaxInterval(5*time.Second))
		})
		for _, s := range []float64{1, 2, 4, 5, 5, 5} {
			stepExactly(t, fc, done, time.Duration(s*float64(time.Second)))
		}
		require.NoError(t, result(t, done))
		require.Equal(t, secs(0, 1, 3, 7, 12, 17, 22), r.times())
		require.False(t, fc.HasWaiters())
	})
}

func TestRetryDefaultSequence(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fc := clocktesting.NewFakeClock(epoch)
		r := &recorder{fc: fc, next: failTimes(4)}
		done := async(func() error { return Retry(t.Context(), r.op, WithClock(fc), WithJitter(0)) })
		// 100ms initial, multiplier 1.5.
		waits := []time.Duration{100 * time.Millisecond, 150 * time.Millisecond, 225 * time.Millisecond, 337500 * time.Microsecond}
		for _, w := range waits {
			stepExactly(t, fc, done, w)
		}
		require.NoError(t, result(t, done))
		require.Len(t, r.times(), 5)
	})
}

func TestRetryInitialIntervalClampedToMax(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fc := clocktesting.NewFakeClock(epoch)
		r := &recorder{fc: fc, next: failTimes(2)}
		done := async(func() error {
			return Retry(t.Context(), r.op, WithClock(fc), WithJitter(0), WithMaxInterval(50*time.Millisecond))
		})
		stepExactly(t, fc, done, 50*time.Millisecond)
		stepExactly(t, fc, done, 50*time.Millisecond)
		require.NoError(t, result(t, done))
		require.Equal(t, []time.Duration{0, 50 * time.Millisecond, 100 * time.Millisecond}, r.times())
	})
}

func TestRetryJitterBounds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fc := clocktesting.NewFakeClock(epoch)
		const n = 30
		r := &recorder{fc: fc, next: failTimes(n)}
		// Stepping 10ms at a time finds when each timer fires to within 10ms.
		err := drive(t, fc, 10*time.Millisecond, func() error {
			return Retry(t.Context(), r.op, WithClock(fc), WithJitter(0.5),
				WithInitialInterval(time.Second), WithMultiplier(1))
		})
		require.NoError(t, err)
		times := r.times()
		require.Len(t, times, n+1)
		distinct := map[time.Duration]bool{}
		for i := 1; i < len(times); i++ {
			w := times[i] - times[i-1]
			// With factor 0.5 each wait lies in [0.5s, 1.5s].
			require.GreaterOrEqual(t, w, 500*time.Millisecond)
			require.Less(t, w, 1510*time.Millisecond)
			distinct[w] = true
		}
		require.Greater(t, len(distinct), 1, "waits are randomized")
	})
}

func TestRetryPermanentStopsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fc := clocktesting.NewFakeClock(epoch)
		logs := newCapture(fc, 0)
		inner := errors.New("bad request")
		r := &recorder{fc: fc, next: func(int) error { return Permanent(inner) }}
		err := Retry(logs.ctx(t.Context()), r.op, WithClock(fc))
		require.True(t, err == inner, "the inner error is returned, got %#v", err)
		require.False(t, IsPermanent(err))
		require.Equal(t, 1, r.count())
		require.False(t, fc.HasWaiters())
		entries := logs.all()
		require.Len(t, entries, 1)
		require.Equal(t, -1, entries[0].level)
		require.Equal(t, inner, entries[0].err)
	})
}

func TestRetryPermanentWrappedIsKept(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fc := clocktesting.NewFakeClock(epoch)
		inner := errors.New("bad request")
		wrapped := fmt.Errorf("create: %w", Permanent(inner))
		calls := 0
		err := Retry(t.Context(), func(context.Context) error { calls++; return wrapped }, WithClock(fc))
		require.True(t, err == wrapped)
		require.ErrorIs(t, err, inner)
		require.Equal(t, 1, calls)
	})
}

func TestRetryPermanentFromV4(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fc := clocktesting.NewFakeClock(epoch)
		calls := 0
		err := Retry(t.Context(), func(context.Context) error { calls++; return cbackoff.Permanent(errBoom) }, WithClock(fc))
		require.True(t, err == errBoom)
		require.Equal(t, 1, calls)
	})
}

// Permanent markers of either cenkalti major version stop Retry. The
// attempt limit turns a missed marker into a failure instead of a hang.
func TestRetryPermanentFromV5(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		calls := 0
		err := Retry(t.Context(), func(context.Context) error {
			calls++
			return fmt.Errorf("create: %w", cbackoffv5.Permanent(errBoom))
		}, WithMaxAttempts(3))
		require.ErrorIs(t, err, errBoom)
		require.True(t, IsPermanent(err))
		require.Equal(t, 1, calls)

		calls = 0
		err = Retry(t.Context(), func(context.Context) error { calls++; return cbackoffv5.Permanent(errBoom) }, WithMaxAttempts(3))
		require.True(t, err == errBoom, "the v5 marker is removed like ours, got %#v", err)
		require.Equal(t, 1, calls)
	})
}

// hostPermanent is a host error type that marks itself permanent.
type hostPermanent struct{ permanent bool }

func (e hostPermanent) Error() string   { return "host error" }
func (e hostPermanent) Permanent() bool { return e.permanent }

func TestRetryPermanentHostMarker(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		calls := 0
		err := Retry(t.Context(), func(context.Context) error {
			calls++
			return fmt.Errorf("apply: %w", hostPermanent{permanent: true})
		}, WithMaxAttempts(3))
		require.ErrorAs(t, err, new(hostPermanent))
		require.Equal(t, 1, calls)

		// Permanent() false is an ordinary, retried error.
		calls = 0
		err = Retry(t.Context(), func(context.Context) error {
			calls++
			if calls < 3 {
				return hostPermanent{permanent: false}
			}
			return nil
		})
		require.NoError(t, err)
		require.Equal(t, 3, calls)
	})
}

// hintErr is a host error type that carries its own retry-after hint.
type hintErr struct{ d time.Duration }

func (e hintErr) Error() string             { return "throttled" }
func (e hintErr) RetryAfter() time.Duration { return e.d }

func TestRetryAfterHintHonouredAndClamped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fc := clocktesting.NewFakeClock(epoch)
		logs := newCapture(fc, 0)
		r := &recorder{fc: fc, next: func(n int) error {
			switch n {
			case 1:
				return RetryAfter(errBoom, 7*time.Second)
			case 2:
				return RetryAfter(errBoom, 10*time.Minute) // cut to 1 minute
			case 3:
				return RetryAfter(errBoom, 20*time.Minute) // cut again, not logged again
			case 4:
				return fmt.Errorf("list: %w", hintErr{3 * time.Second})
			case 5:
				return fmt.Errorf("list: %w", &cbackoffv5.RetryAfterError{Duration: 4 * time.Second})
			}
			return nil
		}}
		done := async(func() error {
			return Retry(logs.ctx(t.Context()), r.op, WithClock(fc), WithJitter(0), WithQuietPeriod(time.Hour))
		})
		stepExactly(t, fc, done, 7*time.Second)
		stepExactly(t, fc, done, time.Minute)
		stepExactly(t, fc, done, time.Minute)
		stepExactly(t, fc, done, 3*time.Second)
		stepExactly(t, fc, done, 4*time.Second)
		require.NoError(t, result(t, done))
		require.Equal(t, secs(0, 7, 67, 127, 130, 134), r.times())
		capped := logs.at("Retry-after hint above the limit, waiting the limit instead", 0)
		require.Equal(t, secs(7), capped, "a hint above the cap is logged once per call")
		require.Equal(t, 10*time.Minute, logs.all()[0].kv["hint"])
	})
}

// A hint of zero or less asks for nothing: the computed wait applies. The
// Kubernetes API server suggests a delay of 0 for ServerTimeout; obeying it
// literally made Retry spin.
func TestRetryAfterHintZeroOrNegativeFallsBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		for _, hint := range []time.Duration{0, -time.Second} {
			fc := clocktesting.NewFakeClock(epoch)
			r := &recorder{fc: fc, next: func(n int) error {
				if n <= 3 {
					return RetryAfter(errBoom, hint)
				}
				return nil
			}}
			done := async(func() error {
				return Retry(t.Context(), r.op, WithClock(fc), WithJitter(0), WithInitialInterval(time.Second), WithMultiplier(2))
			})
			stepExactly(t, fc, done, time.Second)
			stepExactly(t, fc, done, 2*time.Second)
			stepExactly(t, fc, done, 4*time.Second)
			require.NoError(t, result(t, done))
			require.Equal(t, secs(0, 1, 3, 7), r.times(), "hint %v", hint)
		}
	})
}

// On the real clock in a bubble: a server that always answers "retry after
// 0" gets the backoff sequence, not a hot loop.
func TestRetryAfterHintZeroDoesNotSpin(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		calls := 0
		err := Retry(ctx, func(context.Context) error {
			calls++
			if calls > 1000 { // a spinning loop never lets the bubble's clock move
				return Permanent(errors.New("spinning"))
			}
			return RetryAfter(errBoom, 0)
		})
		require.ErrorIs(t, err, context.DeadlineExceeded)
		// 100ms growing by 1.5 to 30s with ±20% jitter: about 15 calls to
		// reach the cap, then one per 24–36s. Far from tens of thousands.
		require.Less(t, calls, 25)
		require.Greater(t, calls, 5)
	})
}

// Callers given the same hint do not all wake at the same instant: a hinted
// wait is drawn from [hint, hint*(1+j)], never shorter than the hint. (The
// backoff is capped below the hint here, so the hint is the longer wait.)
func TestRetryAfterHintJittered(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 40
		var times []time.Duration
		start := time.Now()
		err := Retry(t.Context(), func(context.Context) error {
			times = append(times, time.Since(start))
			if len(times) <= n {
				return RetryAfter(errBoom, 10*time.Second)
			}
			return nil
		}, WithJitter(0.5), WithMaxInterval(time.Second))
		require.NoError(t, err)
		distinct := map[time.Duration]bool{}
		for i := 1; i < len(times); i++ {
			w := times[i] - times[i-1]
			require.GreaterOrEqual(t, w, 10*time.Second, "never earlier than the hint")
			require.LessOrEqual(t, w, 15*time.Second)
			distinct[w] = true
		}
		require.Greater(t, len(distinct), n/2, "hinted waits are spread")
	})
}

func TestRetryMaxRetryAfterOption(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fc := clocktesting.NewFakeClock(epoch)
		r := &recorder{fc: fc, next: func(n int) error {
			if n == 1 {
				return RetryAfter(errBoom, 5*time.Second)
			}
			return nil
		}}
		done := async(func() error {
			return Retry(t.Context(), r.op, WithClock(fc), WithJitter(0), WithMaxRetryAfter(2*time.Second))
		})
		stepExactly(t, fc, done, 2*time.Second)
		require.NoError(t, result(t, done))

		// Zero ignores hints: the computed 100ms wait applies.
		fc = clocktesting.NewFakeClock(epoch)
		r = &recorder{fc: fc, next: r.next}
		done = async(func() error {
			return Retry(t.Context(), r.op, WithClock(fc), WithJitter(0), WithMaxRetryAfter(0))
		})
		stepExactly(t, fc, done, 100*time.Millisecond)
		require.NoError(t, result(t, done))
		require.Equal(t, []time.Duration{0, 100 * time.Millisecond}, r.times())
	})
}

func TestRetryContextCancelMidWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fc := clocktesting.NewFakeClock(epoch)
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		r := &recorder{fc: fc, next: failTimes(100)}
		done := async(func() error { return Retry(ctx, r.op, WithClock(fc), WithJitter(0), WithName("db")) })
		stepExactly(t, fc, done, 100*time.Millisecond)
		waitFor(t, "the second attempt", func() bool { return r.count() == 2 })
		awaitWaiter(t, fc, done)
		cancel()
		err := result(t, done)
		require.ErrorIs(t, err, context.Canceled)
		require.ErrorIs(t, err, errBoom)
		require.ErrorContains(t, err, "attempt 2: boom", "the last error is wrapped")
		require.ErrorContains(t, err, `"db"`)
		require.Equal(t, 2, r.count())
		require.False(t, fc.HasWaiters(), "the timer is released")
	})
}

func TestRetryContextDoneBeforeStart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		calls := 0
		err := Retry(ctx, func(context.Context) error { calls++; return nil })
		require.True(t, err == context.Canceled, "plain ctx.Err(), got %v", err)
		require.Zero(t, calls)
	})
}

func TestRetryOpEndsContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fc := clocktesting.NewFakeClock(epoch)
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		var got context.Context
		err := Retry(ctx, func(c context.Context) error {
			got = c
			cancel()
			return errBoom
		}, WithClock(fc))
		require.True(t, got == ctx, "op receives the caller's context")
		require.ErrorIs(t, err, context.Canceled)
		require.ErrorIs(t, err, errBoom)
		require.False(t, fc.HasWaiters())
	})
}

func TestRetryNoHiddenElapsedCap(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fc := clocktesting.NewFakeClock(epoch)
		r := &recorder{fc: fc}
		r.next = func(int) error {
			if fc.Since(epoch) < 20*time.Minute {
				return errBoom
			}
			return nil
		}
		done := async(func() error { return Retry(t.Context(), r.op, WithClock(fc), WithJitter(0)) })
		for {
			var finished bool
			var err error
			waitFor(t, "a timer or the result", func() bool {
				if fc.HasWaiters() {
					return true
				}
				select {
				case err = <-done:
					finished = true
					return true
				default:
					return false
				}
			})
			if finished {
				require.NoError(t, err)
				break
			}
			fc.Step(DefaultMaxInterval) // every wait is at most 30s with jitter 0
		}
		require.GreaterOrEqual(t, r.times()[r.count()-1], 20*time.Minute)
	})
}

func TestRetryMaxAttempts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fc := clocktesting.NewFakeClock(epoch)
		r := &recorder{fc: fc, next: failTimes(100)}
		done := async(func() error {
			return Retry(t.Context(), r.op, WithClock(fc), WithJitter(0), WithMaxAttempts(3), WithName("db"))
		})
		stepExactly(t, fc, done, 100*time.Millisecond)
		stepExactly(t, fc, done, 150*time.Millisecond)
		err := result(t, done)
		require.ErrorIs(t, err, ErrGaveUp)
		require.ErrorIs(t, err, errBoom)
		require.ErrorContains(t, err, "attempt 3: boom")
		require.ErrorContains(t, err, `"db" after 3 attempts`)
		require.Equal(t, 3, r.count())
		require.False(t, fc.HasWaiters())

		// One attempt means no retry at all.
		calls := 0
		err = Retry(t.Context(), func(context.Context) error { calls++; return errBoom }, WithMaxAttempts(1))
		require.ErrorIs(t, err, ErrGaveUp)
		require.Equal(t, 1, calls)
	})
}

func TestRetryMaxElapsedTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fc := clocktesting.NewFakeClock(epoch)
		r := &recorder{fc: fc, next: failTimes(100)}
		done := async(func() error {
			return Retry(t.Context(), r.op, WithClock(fc), WithJitter(0), WithMultiplier(2), WithMaxElapsedTime(time.Second))
		})
		// Attempts at 0, 100ms, 300ms, 700ms; the next wait (800ms) would end at 1.5s.
		for _, w := range []time.Duration{100, 200, 400} {
			stepExactly(t, fc, done, w*time.Millisecond)
		}
		err := result(t, done)
		require.ErrorIs(t, err, ErrGaveUp)
		require.ErrorIs(t, err, errBoom)
		require.ErrorContains(t, err, "attempt 4: boom")
		require.Equal(t, []time.Duration{0, 100 * time.Millisecond, 300 * time.Millisecond, 700 * time.Millisecond}, r.times())
		require.False(t, fc.HasWaiters())
	})
}

func TestRetryInvalidOptions(t *testing.T) {
	tests := map[string]RetryOption{
		"zero initial":       WithInitialInterval(0),
		"negative initial":   WithInitialInterval(-time.Second),
		"zero max":           WithMaxInterval(0),
		"multiplier below 1": WithMultiplier(0.5),
		"multiplier NaN":     WithMultiplier(nanValue()),
		"multiplier Inf":     WithMultiplier(infValue()),
		"negative jitter":    WithJitter(-0.1),
		"jitter above 1":     WithJitter(1.5),
		"negative elapsed":   WithMaxElapsedTime(-1),
		"negative attempts":  WithMaxAttempts(-1),
		"negative hint cap":  WithMaxRetryAfter(-1),
		"negative quiet":     WithQuietPeriod(-1),
		"negative log":       WithLogInterval(-1),
	}
	for name, opt := range tests {
		t.Run(name, func(t *testing.T) {
			calls := 0
			err := Retry(t.Context(), func(context.Context) error { calls++; return nil }, opt)
			require.ErrorIs(t, err, ErrInvalidOption)
			require.Zero(t, calls)
		})
	}
	err := Retry(t.Context(), nil)
	require.ErrorIs(t, err, ErrInvalidOption)
	require.ErrorContains(t, err, "nil operation")

	// Several problems are all reported.
	err = Retry(t.Context(), func(context.Context) error { return nil }, WithJitter(2), WithMaxAttempts(-3))
	require.ErrorContains(t, err, "jitter 2")
	require.ErrorContains(t, err, "max attempts -3")
}

func TestRetryQuietLogging(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fc := clocktesting.NewFakeClock(epoch)
		logs := newCapture(fc, 0)
		r := &recorder{fc: fc}
		r.next = func(int) error {
			if fc.Since(epoch) < 25*time.Second {
				return errBoom
			}
			return nil
		}
		// Waits 100ms, 200ms, 400ms, 800ms, then 1s: attempts at 0, 0.1, 0.3,
		// 0.7, 1.5, 2.5, 3.5, ..., 24.5, 25.5.
		err := drive(t, fc, 100*time.Millisecond, func() error {
			return Retry(logs.ctx(t.Context()), r.op, WithClock(fc), WithJitter(0), WithMultiplier(2),
				WithMaxInterval(time.Second), WithName("db"))
		})
		require.NoError(t, err)
		require.Equal(t, secs(25.5), r.times()[r.count()-1:])

		// Nothing during the first 2s, then at most once per 10s.
		require.Equal(t, secs(2.5, 12.5, 22.5), logs.at("Operation failed, will retry", 0))
		require.Equal(t, secs(25.5), logs.at("Operation succeeded after failures", 0))
		entries := logs.all()
		require.Len(t, entries, 4, "nothing else is logged at V(0)")
		first := entries[0]
		require.Equal(t, "db", first.kv["operation"])
		require.Equal(t, 6, first.kv["attempt"])
		require.ErrorIs(t, first.kv["error"].(error), errBoom)
		require.Equal(t, 2500*time.Millisecond, first.kv["failingFor"])
		last := entries[3]
		require.Equal(t, r.count(), last.kv["attempt"])
		require.Equal(t, r.count()-1, last.kv["failures"])
	})
}

func TestRetryQuietSuccessStaysAtV1(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fc := clocktesting.NewFakeClock(epoch)
		logs := newCapture(fc, 1)
		r := &recorder{fc: fc, next: failTimes(3)}
		// Attempts at 0, 0.5s, 1s and 1.5s: all within the 2s quiet period.
		err := drive(t, fc, 500*time.Millisecond, func() error {
			return Retry(logs.ctx(t.Context()), r.op, WithClock(fc))
		})
		require.NoError(t, err)
		require.Empty(t, logs.at("Operation failed, will retry", 0))
		require.Len(t, logs.at("Operation failed, will retry", 1), 3, "each retry decision at V(1)")
		require.Empty(t, logs.at("Operation succeeded after failures", 0))
		require.Len(t, logs.at("Operation succeeded after failures", 1), 1)
	})
}

func TestRetryLogEveryFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fc := clocktesting.NewFakeClock(epoch)
		logs := newCapture(fc, 0)
		r := &recorder{fc: fc, next: failTimes(3)}
		err := drive(t, fc, time.Second, func() error {
			return Retry(logs.ctx(t.Context()), r.op, WithClock(fc), WithQuietPeriod(0), WithLogInterval(0))
		})
		require.NoError(t, err)
		require.Equal(t, secs(0, 1, 2), logs.at("Operation failed, will retry", 0))
		require.Equal(t, secs(3), logs.at("Operation succeeded after failures", 0))
		_, named := logs.all()[0].kv["operation"]
		require.False(t, named, "no name, no operation key")
	})
}

func TestRetryGiveUpAndCancelLoggedAtV1(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		logs := newCapture(nil, 1)
		err := Retry(logs.ctx(t.Context()), func(context.Context) error { return errBoom }, WithMaxAttempts(1))
		require.ErrorIs(t, err, ErrGaveUp)
		require.Len(t, logs.at("Giving up", 1), 1)
	})
}

// The cap bounds a hinted wait with its jitter: a hint at or above the cap
// never waits longer than the cap, and hints cut to the cap stay spread
// (nodestatus promises at most 5 s between attempts, jitter included, and
// caps its backoff as here, so that the longer of the backoff and the hint
// stays within 5 s too).
func TestRetryAfterCapIncludesJitter(t *testing.T) {
	for _, hint := range []time.Duration{4 * time.Second, 5 * time.Second, 6 * time.Second, time.Minute} {
		synctest.Test(t, func(t *testing.T) {
			const n = 40
			var times []time.Duration
			start := time.Now()
			err := Retry(t.Context(), func(context.Context) error {
				times = append(times, time.Since(start))
				if len(times) <= n {
					return RetryAfter(errBoom, hint)
				}
				return nil
			}, WithJitter(0.2), WithMaxInterval(5*time.Second*5/6), WithMaxRetryAfter(5*time.Second))
			require.NoError(t, err)
			distinct := map[time.Duration]bool{}
			for i := 1; i < len(times); i++ {
				w := times[i] - times[i-1]
				require.LessOrEqual(t, w, 5*time.Second, "hint %v: a wait above the cap", hint)
				require.GreaterOrEqual(t, w, min(hint, 5*time.Second*5/6), "hint %v", hint)
				distinct[w] = true
			}
			if hint != 5*time.Second { // a hint of exactly the cap has no room above it
				require.Greater(t, len(distinct), n/4, "hint %v: waits are spread", hint)
			}
		})
	}
}
