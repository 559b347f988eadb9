package lbrecon_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconkit/reconkit/lbrecon"
	"github.com/reconkit/reconkit/lbrecon/lbrecontest"
)

// staleOnce answers one listing, once armed, with a listing taken earlier
// (a read replica behind a destroy), and every other from its engine.
type staleOnce struct {
	*lbrecontest.Engine
	mu    sync.Mutex
	stale []lbrecon.Object
}

func (s *staleOnce) List(ctx context.Context, q lbrecon.Query) ([]lbrecon.Object, error) {
	s.mu.Lock()
	stale := s.stale
	s.stale = nil
	s.mu.Unlock()
	if stale != nil {
		return stale, nil
	}
	return s.Engine.List(ctx, q)
}

// A listing that shows again an object the reconciler already counts as
// gone (a lagging replica behind someone else's destroy) does not end the
// intent of a creation whose answer was lost: that object is not the
// creation's, so the name stays held and is not created a second time.
func TestDestroyedCopyListedAgainKeepsTheIntent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const lag = 2 * time.Second
		eng := &staleOnce{Engine: newEngine(lbrecontest.Config{})}
		want := lbrecon.Object{Kind: "k", Name: "x", Spec: "s"}
		r, err := lbrecon.New(lbrecon.Config{Engine: eng, Tag: owner, Journal: lbrecon.NoJournal, ListLag: lag,
			Steps: []lbrecon.Step{{Kind: "k", Plan: func(_ context.Context, obs *lbrecon.Observation) (lbrecon.Changes, error) {
				return lbrecon.Diff([]lbrecon.Object{want}, obs.Objects("k"), nil), nil
			}}}})
		require.NoError(t, err)
		named := func() int {
			n := 0
			for _, o := range eng.Objects() {
				if o.Kind == "k" && o.Name == "x" {
					n++
				}
			}
			return n
		}

		// Another process created x; this reconciler sees it.
		first := want
		first.Tags = []string{owner}
		first = eng.Put(first)
		<-time.After(2 * time.Second) // past Pending: it is ok
		_, err = r.ReconcileOnce(t.Context())
		require.NoError(t, err)
		stale, err := eng.Engine.List(t.Context(), lbrecon.Query{Tag: owner})
		require.NoError(t, err)

		// The other process destroys it; past the lag a listing misses it,
		// and this reconciler creates x, whose answer is lost.
		require.True(t, eng.DeleteObject(first.Key()))
		<-time.After(lag + time.Second)
		eng.LoseCreateAnswers(1)
		_, _ = r.ReconcileOnce(t.Context())
		require.Equal(t, 1, named(), "the lost creation is at the provider")

		// A replica behind the destroy shows the old x again, not the new.
		eng.mu.Lock()
		eng.stale = stale
		eng.mu.Unlock()
		_, _ = r.ReconcileOnce(t.Context())
		require.Equal(t, 1, named(), "x created again while its lost creation was still unconfirmed")

		for range 20 {
			res, err := r.ReconcileOnce(t.Context())
			if err == nil && res.Converged {
				break
			}
			<-time.After(time.Second)
		}
		require.Equal(t, 1, named(), "x created twice")
	})
}
