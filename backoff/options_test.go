package backoff

import (
	"context"
	"math"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
)

func nanValue() float64 { return math.NaN() }
func infValue() float64 { return math.Inf(1) }

// Options apply only where they mean something: an option that one loop
// would ignore is not of that loop's option type, so passing it does not
// compile. These checks fail if a type gains a method it must not have.
func TestOptionScopes(t *testing.T) {
	type scopes struct{ retry, every, poll bool }
	scope := func(o any) scopes {
		_, r := o.(RetryOption)
		_, e := o.(EveryOption)
		_, p := o.(PollOption)
		return scopes{r, e, p}
	}
	all, retryPoll, retryOnly, everyPoll, everyOnly := scopes{true, true, true}, scopes{true, false, true}, scopes{true, false, false}, scopes{false, true, true}, scopes{false, true, false}
	for name, tc := range map[string]struct {
		opt  any
		want scopes
	}{
		"WithClock":           {WithClock(nil), all},
		"WithName":            {WithName("x"), all},
		"WithQuietPeriod":     {WithQuietPeriod(0), all},
		"WithLogInterval":     {WithLogInterval(0), all},
		"WithMaxInterval":     {WithMaxInterval(time.Second), retryPoll},
		"WithMultiplier":      {WithMultiplier(2), retryPoll},
		"WithJitter":          {WithJitter(0), retryPoll},
		"WithMaxRetryAfter":   {WithMaxRetryAfter(0), retryPoll},
		"WithInitialInterval": {WithInitialInterval(time.Second), retryOnly},
		"WithMaxAttempts":     {WithMaxAttempts(1), retryOnly},
		"WithMaxElapsedTime":  {WithMaxElapsedTime(time.Second), retryOnly},
		"WithDelayedStart":    {WithDelayedStart(), everyPoll},
		"WithFailureBackoff":  {WithFailureBackoff(time.Second), everyOnly},
	} {
		require.Equal(t, tc.want, scope(tc.opt), name)
	}
}

// A nil option is ignored by every loop.
func TestNilOptionsIgnored(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		require.NoError(t, Retry(t.Context(), func(context.Context) error { return nil }, nil, WithName("x")))
		ctx, cancel := context.WithCancel(t.Context())
		calls := 0
		err := Every(ctx, time.Second, 0, func(context.Context) error { calls++; cancel(); return nil }, nil)
		require.NoError(t, err)
		require.Equal(t, 1, calls)
		require.NoError(t, Poll(t.Context(), time.Second, 0, func(context.Context) (bool, error) { return true, nil }, nil))
	})
}

// Without WithClock the loops wait on the real clock: in a bubble, the
// bubble's clock, so the waits are exact.
func TestDefaultClockIsReal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Now()
		var at []time.Duration
		err := Retry(t.Context(), func(context.Context) error {
			at = append(at, time.Since(start))
			if len(at) < 3 {
				return errBoom
			}
			return nil
		}, WithJitter(0))
		require.NoError(t, err)
		require.Equal(t, []time.Duration{0, 100 * time.Millisecond, 250 * time.Millisecond}, at)
	})
}
