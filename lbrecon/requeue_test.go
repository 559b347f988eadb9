package lbrecon_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/reconkit/reconkit/lbrecon"
	"github.com/reconkit/reconkit/lbrecon/lbrecontest"
)

// Tests of when ReconcileOnce asks to be called again after a pass that
// wrote: not before a listing can show the writes (the declared lag, until
// the provider's pace is learnt), since every call before then finds
// nothing new and costs the host a requeue (a Warning event in a CCM).

// A provider that declares a 2 s list lag, driven with a 50 ms
// PollInterval: each wave of creations is followed by one requeue of at
// least the lag, not by polls that cannot see the wave yet.
func TestReconcileOnceWaitsForTheDeclaredLagAfterWriting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const lag = 2 * time.Second
		fc := clocktesting.NewFakeClock(time.Unix(1000, 0))
		eng := lbrecontest.New(lbrecontest.Config{Clock: fc, ListLag: lag, DeclareListLag: true, Pending: 100 * time.Millisecond})
		lb := desc(2, 2, 3)
		r := newLB(t, eng, lb, func(c *lbrecon.Config) { c.Clock, c.PollInterval = fc, 50*time.Millisecond })
		passes, blind := 0, 0
		for {
			passes++
			require.Less(t, passes, 100, "no convergence")
			before := eng.Calls()[lbrecon.VerbCreate]
			res, err := once(t, fc, r.ReconcileOnce)
			require.NoError(t, err)
			if res.Converged {
				break
			}
			if eng.Calls()[lbrecon.VerbCreate] > before && res.RequeueAfter < lag {
				blind++
				t.Logf("pass %d created and asks again after %v, before the %v lag", passes, res.RequeueAfter, lag)
			}
			fc.Step(res.RequeueAfter)
		}
		// Backends, frontends and listeners in waves, each shown by the
		// listing one lag after it: 4 passes (13 when every pass polled
		// from PollInterval).
		require.LessOrEqual(t, passes, 5, "passes for one provisioning")
		require.Zero(t, blind, "a pass that created asks again before any listing can show its creations")
		require.Equal(t, objectCount(lb), eng.Calls()[lbrecon.VerbCreate], "no duplicates")
		requireConverged(t, eng, r, lb)
	})
}

// Nothing written and nothing declared: the polls for pending objects
// still start at PollInterval.
func TestReconcileOnceWithoutLagPollsAtPollInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fc := clocktesting.NewFakeClock(time.Unix(1000, 0))
		eng := lbrecontest.New(lbrecontest.Config{Clock: fc, Pending: time.Second})
		lb := desc(1, 1, 1)
		r := newLB(t, eng, lb, func(c *lbrecon.Config) { c.Clock, c.PollInterval = fc, 50*time.Millisecond })
		res, err := once(t, fc, r.ReconcileOnce)
		require.NoError(t, err)
		require.False(t, res.Converged)
		require.Equal(t, 50*time.Millisecond, res.RequeueAfter, "no lag declared, nothing learnt: PollInterval")
	})
}
