package lbrecon_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconkit/reconkit/lbrecon"
	"github.com/reconkit/reconkit/lbrecon/lbrecontest"
)

// Listings that go back to a state from before a call, within the lag,
// at the other places a listing confirms or ends a record than intents
// (intent_test.go, untagged_test.go): an acknowledged update, and a
// leftovers teardown. Each staged with a listing taken before the call
// and answered once after it (staleOnce).

// listNow returns what the engine lists for lb now.
func listNow(t *testing.T, eng *staleOnce, lb lbrecon.LoadBalancer) []lbrecon.Object {
	t.Helper()
	objs, err := eng.Engine.List(t.Context(), lbrecon.Query{Tag: owner, Scope: lb.ID})
	require.NoError(t, err)
	return objs
}

// answerOnce makes the next listing answer objs.
func (s *staleOnce) answerOnce(objs []lbrecon.Object) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stale = objs
}

// An acknowledged update whose object a listing shows as it was, before
// the update's horizon and after a listing showed it updated, is not made
// again: the plan is made from the ack, which only a listing at its
// horizon confirms or contradicts.
func TestUpdateShownAsItWasIsNotMadeAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const lag = 2 * time.Second
		eng := &staleOnce{Engine: newEngine(lbrecontest.Config{})}
		lb := desc(1, 1, 2)
		r := newLB(t, eng, lb, func(c *lbrecon.Config) { c.ListLag = lag })
		onceUntilConverged(t, r)
		<-time.After(2 * lag)
		onceUntilConverged(t, r)
		before := listNow(t, eng, lb)

		lb.Ports[0].NodePort++ // servers updated in place
		require.NoError(t, r.SetLoadBalancer(lb))
		eng.ResetCalls()
		res, err := r.ReconcileOnce(t.Context())
		require.NoError(t, err)
		require.Len(t, res.Plan.Update, 2, "%+v", res.Plan)
		require.Equal(t, 2, eng.Calls()[lbrecon.VerbUpdate])
		<-time.After(100 * time.Millisecond)
		res, err = r.ReconcileOnce(t.Context())
		require.NoError(t, err)
		require.True(t, res.Converged, "a listing shows the updates: %+v", res.Plan)

		// A replica behind the updates shows the servers as they were.
		eng.answerOnce(before)
		res, err = r.ReconcileOnce(t.Context())
		require.NoError(t, err)
		require.Empty(t, res.Plan.Update, "updated again from a listing within the lag")
		require.Equal(t, 2, eng.Calls()[lbrecon.VerbUpdate])
		require.True(t, res.Converged, "the acks stand: %+v", res.Plan)
		<-time.After(2 * lag)
		onceUntilConverged(t, r)
		require.Equal(t, 2, eng.Calls()[lbrecon.VerbUpdate], "each server updated once")
	})
}

// A leftovers teardown that converged is not undone by a listing within
// the lag that shows again the objects it destroyed (a replica behind the
// destroys): they are not destroyed again, and the teardown stays
// converged.
func TestLeftoversDestroyedCopiesListedAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const lag = 2 * time.Second
		eng := &staleOnce{Engine: newEngine(lbrecontest.Config{})}
		old := desc(1, 1, 2)
		old.ID = "lb-old"
		require.NoError(t, newLB(t, eng, old, nil).Reconcile(t.Context()))
		n := len(eng.Objects())
		l, err := lbrecon.NewLeftovers(lbrecon.Config{Engine: eng, Tag: owner, Journal: lbrecon.NoJournal, ListLag: lag}, "lb-new")
		require.NoError(t, err)
		var before []lbrecon.Object
		for i := 0; ; i++ {
			require.Less(t, i, 50, "not converged")
			if i == 0 {
				before = listNow(t, eng, old)
			}
			res, err := l.TeardownOnce(t.Context())
			require.NoError(t, err)
			if res.Converged {
				break
			}
			<-time.After(res.RequeueAfter)
		}
		require.Empty(t, eng.Objects())
		require.Equal(t, n, eng.Calls()[lbrecon.VerbDestroy])

		eng.answerOnce(before)
		res, err := l.TeardownOnce(t.Context())
		require.NoError(t, err)
		require.True(t, res.Converged, "a replica behind the destroys: %+v", res.Plan)
		require.Equal(t, n, eng.Calls()[lbrecon.VerbDestroy], "destroyed again")
	})
}
