package electiontest_test

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconkit/reconkit/election"
	"github.com/reconkit/reconkit/election/electiontest"
)

func TestRecorder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := electiontest.NewRecorder()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		got := make(chan election.Observation, 1)
		go func() {
			o, err := r.Await(ctx, electiontest.Is(election.EventLost))
			require.NoError(t, err)
			got <- o
		}()
		synctest.Wait()
		r.Observe(election.Observation{Event: election.EventAcquired, Token: 1})
		synctest.Wait()
		require.Empty(t, got, "woken by another event")
		r.Event("Warning", election.ReasonLeadershipLost, "lost")
		r.Observe(election.Observation{Event: election.EventLost, Token: 1})
		require.Equal(t, election.Token(1), recv(t, got, "the recorded event").Token)
		require.Equal(t, []string{"Warning LeadershipLost"}, r.Events())
		require.Equal(t, 1, r.Count(election.EventAcquired))
		require.NoError(t, r.AwaitCount(ctx, election.EventAcquired, 1))

		short, stop := context.WithTimeout(ctx, time.Second)
		defer stop()
		require.ErrorIs(t, r.AwaitCount(short, election.EventRenewed, 1), context.DeadlineExceeded)
		_, err := r.Await(short, electiontest.Is(election.EventResigned))
		require.ErrorContains(t, err, "not observed")
	})
}
