package checkpoint_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/reconkit/reconkit/checkpoint"
)

// TestTrialCheck: the check fails only while a trial runs undecided past
// its duration plus the grace; a rollback does not fail it.
func TestTrialCheck(t *testing.T) {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	ctrl, err := checkpoint.New(checkpoint.Config[int]{
		Store:         &checkpoint.MemStore{},
		Parse:         func(b []byte) (int, error) { return strconv.Atoi(string(b)) },
		Validate:      func(int) error { return nil },
		Local:         1,
		TrialDuration: time.Minute,
		Clock:         clk,
	})
	require.NoError(t, err)
	const grace = 10 * time.Second
	check := ctrl.TrialCheck(grace)
	_, err = ctrl.Bootstrap(ctx)
	require.NoError(t, err)
	require.NoError(t, check(nil), "local configuration")

	st, err := ctrl.Assign(ctx, []byte("8"), checkpoint.Source{UID: "cm", ResourceVersion: "1"})
	require.NoError(t, err)
	require.Equal(t, checkpoint.PhaseTrial, st.Phase)
	// Run is not running: nobody decides the trial.
	clk.Step(time.Minute + grace)
	require.NoError(t, check(nil), "at the trial's end plus the grace")
	clk.Step(time.Millisecond)
	err = check(nil)
	require.ErrorIs(t, err, checkpoint.ErrTrialOverdue)

	st, err = ctrl.Rollback(ctx, "probe failed")
	require.NoError(t, err)
	require.Equal(t, checkpoint.PhaseRolledBack, st.Phase)
	require.NoError(t, check(nil), "rolled back: degraded, not unhealthy")
	require.False(t, errors.Is(check(nil), checkpoint.ErrTrialOverdue))
}
