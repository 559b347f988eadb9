package checkpoint_test

import (
	"context"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconkit/reconkit/checkpoint"
)

// retryInstants delivers a payload the disk cannot take to a controller
// with Config.Rand r and returns the instants of fake time, to the
// second, at which its Save was refused over 30 minutes: the first try
// and the retries of the failed assignment.
func retryInstants(t *testing.T, r func() float64) []time.Duration {
	var at []time.Duration
	synctest.Test(t, func(t *testing.T) {
		_, clk, disk, source := runOnFullDiskRand(t, r)
		source.deliveries <- delivery{[]byte("level=5" + strings.Repeat(" ", 128<<10)), src("big", "1")}
		synctest.Wait()
		seen := 0
		for range 30 * 60 {
			if n := disk.refusals(); n > seen {
				seen = n
				at = append(at, clk.Since(t0))
			}
			clk.Step(time.Second)
			synctest.Wait()
		}
	})
	return at
}

// Config.Rand draws the jitter of a failed assignment's retries: two
// controllers given sources with the same seed retry at the same
// instants, and with another seed at other instants.
func TestConfigRandDrawsTheAssignmentRetries(t *testing.T) {
	seeded := func(seed uint64) func() float64 { return rand.New(rand.NewPCG(seed, 1)).Float64 }
	a, b, c := retryInstants(t, seeded(1)), retryInstants(t, seeded(1)), retryInstants(t, seeded(2))
	t.Logf("retries at %v (seed 1), %v (seed 2)", a, c)
	require.Greater(t, len(a), 3, "the assignment is retried")
	require.Equal(t, a, b, "the same seed, the same instants")
	require.NotEqual(t, a, c, "another seed, other instants")
}

// PollSource.Rand draws the jitter of the polling period: with a source
// that always answers 0 it polls every Interval exactly, with one that
// answers 0.5 every 1.05 × Interval (up to 10% jitter).
func TestPollSourceRandDrawsThePeriod(t *testing.T) {
	for _, c := range []struct {
		r    float64
		want time.Duration
	}{{0, time.Second}, {0.5, 1050 * time.Millisecond}} {
		synctest.Test(t, func(t *testing.T) {
			var mu sync.Mutex
			var at []time.Duration
			begin := time.Now()
			ps := &checkpoint.PollSource{Interval: time.Second, Rand: func() float64 { return c.r },
				Fetch: func(context.Context) ([]byte, checkpoint.Source, error) {
					mu.Lock()
					at = append(at, time.Since(begin))
					mu.Unlock()
					return []byte("level=3"), src("a", "1"), nil
				}}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- ps.Watch(ctx, func(context.Context, []byte, checkpoint.Source) {}) }()
			<-time.After(10 * time.Second)
			synctest.Wait()
			cancel()
			require.NoError(t, <-done)
			mu.Lock()
			defer mu.Unlock()
			require.Greater(t, len(at), 5)
			for i := 1; i < len(at); i++ {
				require.Equal(t, c.want, at[i]-at[i-1], "the pause after fetch %d, Rand answering %v: %v", i, c.r, at)
			}
		})
	}
}
