package checkpoint_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconkit/reconkit/checkpoint"
)

func TestWaitFor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctrl, err := checkpoint.New(checkpoint.Config[agentConfig]{
			Store: &checkpoint.MemStore{}, Parse: parseAgent, Validate: validateAgent, Local: agentConfig{Level: 1},
		})
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()

		// Before Bootstrap there is no status: the wait ends with the
		// context and says so.
		short, stop := context.WithTimeout(ctx, time.Second)
		_, err = ctrl.WaitFor(short, func(checkpoint.Status[agentConfig]) bool { return true })
		stop()
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.ErrorContains(t, err, "not bootstrapped")

		// A waiter blocked before the assignment wakes when it lands,
		// without polling.
		got := make(chan checkpoint.Status[agentConfig], 1)
		go func() {
			st, err := ctrl.WaitFor(ctx, func(st checkpoint.Status[agentConfig]) bool { return st.Phase == checkpoint.PhaseTrial })
			require.NoError(t, err)
			got <- st
		}()
		synctest.Wait()
		_, err = ctrl.Bootstrap(ctx)
		require.NoError(t, err)
		synctest.Wait()
		require.Empty(t, got, "woken by the local status")
		_, err = ctrl.Assign(ctx, []byte("level=3"), src("u", "1"))
		require.NoError(t, err)
		st := <-got
		require.Equal(t, 3, st.Config.Level)

		// A condition already true returns at once; one never met shows
		// the status last seen.
		_, err = ctrl.WaitFor(ctx, func(st checkpoint.Status[agentConfig]) bool { return st.Config.Level == 3 })
		require.NoError(t, err)
		short, stop = context.WithTimeout(ctx, time.Second)
		defer stop()
		_, err = ctrl.WaitFor(short, func(st checkpoint.Status[agentConfig]) bool { return st.Phase == checkpoint.PhaseRolledBack })
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.ErrorContains(t, err, "phase Trial")
	})
}
