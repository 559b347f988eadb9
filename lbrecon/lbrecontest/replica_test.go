package lbrecontest_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/reconkit/reconkit/lbrecon"
	"github.com/reconkit/reconkit/lbrecon/lbrecontest"
)

// shownAt lists every 100 ms for 2 s after a change and reports, per
// listing, whether k is listed.
func shownAt(t *testing.T, clk *clocktesting.FakeClock, e *lbrecontest.Engine, k lbrecon.Key) []bool {
	t.Helper()
	var out []bool
	for range 20 {
		l, err := e.List(t.Context(), lbrecon.Query{Tag: tag})
		require.NoError(t, err)
		found := false
		for _, o := range l {
			found = found || o.Key() == k
		}
		out = append(out, found)
		clk.Step(100 * time.Millisecond)
	}
	return out
}

func flips(seen []bool) (appeared, vanished bool) {
	for i := 1; i < len(seen); i++ {
		appeared = appeared || (!seen[i-1] && seen[i])
		vanished = vanished || (seen[i-1] && !seen[i])
	}
	return appeared, vanished
}

// Read replicas: a new object shows, vanishes and shows again within the
// lag (each listing draws its own), always shows once the lag passed, and
// the same seed replays the same history; a deleted object comes back in
// some listings within the lag and never after it.
func TestReplicaListingsGoBackwards(t *testing.T) {
	history := func(seed uint64) ([]bool, []bool) {
		clk := clocktesting.NewFakeClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
		e := lbrecontest.New(lbrecontest.Config{Clock: clk, ReplicaLag: 2 * time.Second, Seed: seed})
		o, err := e.Create(t.Context(), backend("b"))
		require.NoError(t, err)
		created := shownAt(t, clk, e, o.Key())
		l, err := e.List(t.Context(), lbrecon.Query{Tag: tag})
		require.NoError(t, err)
		require.Len(t, l, 1, "shown once the lag passed")
		require.NoError(t, e.Destroy(t.Context(), o))
		deleted := shownAt(t, clk, e, o.Key())
		l, err = e.List(t.Context(), lbrecon.Query{Tag: tag})
		require.NoError(t, err)
		require.Empty(t, l, "gone once the lag passed")
		return created, deleted
	}
	created, deleted := history(7)
	a, v := flips(created)
	require.True(t, a && v, "a new object shows and vanishes again: %v", created)
	a, v = flips(deleted)
	require.True(t, a && v, "a deleted object vanishes and shows again: %v", deleted)
	c2, d2 := history(7)
	require.Equal(t, created, c2, "one seed, one history")
	require.Equal(t, deleted, d2, "one seed, one history")

	e := lbrecontest.New(lbrecontest.Config{ReplicaLag: 2 * time.Second, DeclareListLag: true})
	require.Equal(t, 2*time.Second, e.ListLag(), "the replicas' lag is declared")
	require.Zero(t, e.ListLagListings())
}

// A creation whose answer was lost shows later than the rest: never
// within half the lag.
func TestReplicaLostAnswerShowsLate(t *testing.T) {
	for seed := range uint64(20) {
		clk := clocktesting.NewFakeClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
		e := lbrecontest.New(lbrecontest.Config{Clock: clk, ReplicaLag: 2 * time.Second, Seed: seed})
		e.LoseCreateAnswers(1)
		_, err := e.Create(t.Context(), backend("b"))
		require.ErrorIs(t, err, lbrecontest.ErrInjected)
		k := e.Objects()[0].Key()
		seen := shownAt(t, clk, e, k)
		require.NotContains(t, seen[:10], true, "seed %d: shown within half the lag: %v", seed, seen)
		l, err := e.List(t.Context(), lbrecon.Query{Tag: tag})
		require.NoError(t, err)
		require.Len(t, l, 1, "seed %d: not shown once the lag passed", seed)
	}
}
