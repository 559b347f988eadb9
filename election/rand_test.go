package election_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconkit/reconkit/election"
)

// WithRand is the source of Run's retry waits and of its pauses between
// terms: a source that always draws 0.25 gives the exact instants of its
// campaigns.
func TestRunDrawsItsPausesFromWithRand(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, c := newRec()
		c.failCampaigns.Store(2)
		start := time.Now()
		var at []time.Duration
		ctx, cancel := context.WithCancel(t.Context())
		lead := func(context.Context, election.Leadership) error {
			at = append(at, time.Since(start))
			if len(at) == 2 {
				cancel()
			}
			return nil // a short term: a pause before campaigning again
		}
		err := election.Run(ctx, c, lead, election.WithRand(func() float64 { return 0.25 }))
		require.NoError(t, err)
		// Two failed campaigns wait 0.8b + 0.25×(0.4b+1ns) for b = 100ms,
		// 150ms: 90ms, then 135ms; the first term's pause is 100ms spread
		// by ±20% at 0.25: 90ms.
		require.Equal(t, []time.Duration{225 * time.Millisecond, 315 * time.Millisecond}, at)
	})
}
