package backoff

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"
)

func nanValue() float64 { return math.NaN() }
func infValue() float64 { return math.Inf(1) }

func TestDefaults(t *testing.T) {
	o, err := newOptions(nil, DefaultQuietPeriod)
	require.NoError(t, err)
	require.Equal(t, &options{
		initialInterval: 100 * time.Millisecond,
		maxInterval:     30 * time.Second,
		multiplier:      1.5,
		jitter:          0.2,
		maxElapsedTime:  0,
		maxAttempts:     0,
		maxRetryAfter:   time.Minute,
		clock:           clock.RealClock{},
		quietPeriod:     2 * time.Second,
		logInterval:     10 * time.Second,
	}, o)
}

func TestOptionsApplied(t *testing.T) {
	fc := clocktesting.NewFakeClock(epoch)
	o, err := newOptions([]Option{
		nil, // ignored
		WithInitialInterval(time.Second), WithMaxInterval(time.Minute), WithMultiplier(2),
		WithJitter(0), WithMaxElapsedTime(time.Hour), WithMaxAttempts(5), WithMaxRetryAfter(time.Second),
		WithClock(fc), WithQuietPeriod(0), WithLogInterval(time.Minute), WithName("x"), WithDelayedStart(),
	}, DefaultQuietPeriod)
	require.NoError(t, err)
	require.Equal(t, &options{
		initialInterval: time.Second,
		maxInterval:     time.Minute,
		multiplier:      2,
		jitter:          0,
		maxElapsedTime:  time.Hour,
		maxAttempts:     5,
		maxRetryAfter:   time.Second,
		clock:           fc,
		quietPeriod:     0,
		quietPeriodSet:  true,
		logInterval:     time.Minute,
		name:            "x",
		delayedStart:    true,
	}, o)

	// Every's default quiet period is its own.
	o, err = newOptions(nil, 0)
	require.NoError(t, err)
	require.Zero(t, o.quietPeriod)
}
