package lbrecon_test

import (
	"math/rand/v2"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconkit/reconkit/lbrecon"
	"github.com/reconkit/reconkit/lbrecon/lbrecontest"
)

// givingUp runs a blocking Reconcile, with Config.Rand r, whose destroys
// fail for ever, and returns how long it retried them before giving up:
// the sum of its jittered waits.
func givingUp(t *testing.T, r func() float64) time.Duration {
	var took time.Duration
	synctest.Test(t, func(t *testing.T) {
		eng := newEngine(lbrecontest.Config{})
		lb := desc(1, 1, 1)
		rec := newLB(t, eng, lb, nil)
		require.NoError(t, rec.Reconcile(t.Context()))
		eng.FailDestroy(nil, -1)
		lb.Ports = nil
		rec = newLB(t, eng, lb, func(c *lbrecon.Config) { c.RetryBudget = 20 * time.Second; c.Rand = r })
		start := time.Now()
		require.ErrorIs(t, rec.Reconcile(t.Context()), lbrecontest.ErrInjected)
		took = time.Since(start)
	})
	return took
}

// Config.Rand draws the jitter of the retries of failed engine calls: two
// reconcilers given sources with the same seed give up at the same
// instant, and with another seed at another.
func TestConfigRandDrawsTheRetries(t *testing.T) {
	seeded := func(seed uint64) func() float64 { return rand.New(rand.NewPCG(seed, 1)).Float64 }
	a, b, c := givingUp(t, seeded(1)), givingUp(t, seeded(1)), givingUp(t, seeded(2))
	t.Logf("gave up after %v (seed 1), %v (seed 2)", a, c)
	require.Equal(t, a, b, "the same seed, the same waits")
	require.NotEqual(t, a, c, "another seed, other waits")
}
