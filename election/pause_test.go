package election

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The pause before campaigning again after a short term is spread by the
// retry jitter, so that a fleet whose terms one server restart ended
// together does not campaign again in step; without jitter it is exact.
func TestStepDownPauseIsJittered(t *testing.T) {
	o, err := newRunOptions(nil)
	require.NoError(t, err)
	seen := map[time.Duration]bool{}
	for range 200 {
		d := o.stepDownPause(30) // past the growth: the maximum, 10s
		require.GreaterOrEqual(t, d, 8*time.Second)
		require.LessOrEqual(t, d, 12*time.Second)
		seen[d] = true
	}
	require.Greater(t, len(seen), 100, "pauses of a fleet's candidates must differ")

	o, err = newRunOptions([]RunOption{WithRetryJitter(0)})
	require.NoError(t, err)
	for n, want := range []time.Duration{100 * time.Millisecond, 150 * time.Millisecond, 225 * time.Millisecond} {
		require.Equal(t, want, o.stepDownPause(n+1), "pause after %d short terms", n+1)
	}
	require.Equal(t, DefaultRetryMaxInterval, o.stepDownPause(30))
}
