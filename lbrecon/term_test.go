package lbrecon_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconkit/reconkit/lbrecon"
	"github.com/reconkit/reconkit/lbrecon/lbrecontest"
)

// Tests of a reconciler kept across leadership terms: a call that brings a
// new term's token raises the fence first, then drops what the earlier
// term kept and reads the journal again.

// termEvents records, in order, the fence's admissions, the provider's
// listings and the journal's loads.
type termEvents struct {
	mu  sync.Mutex
	got []string
}

func (e *termEvents) add(format string, a ...any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.got = append(e.got, fmt.Sprintf(format, a...))
}

func (e *termEvents) take() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := e.got
	e.got = nil
	return out
}

// listRecorder records every List of the engine it wraps.
type listRecorder struct {
	*lbrecontest.Engine
	ev *termEvents
}

func (l listRecorder) List(ctx context.Context, q lbrecon.Query) ([]lbrecon.Object, error) {
	l.ev.add("list")
	return l.Engine.List(ctx, q)
}

// loadRecorder records every Load of the journal it wraps.
type loadRecorder struct {
	lbrecon.Journal
	ev *termEvents
}

func (j loadRecorder) Load(ctx context.Context) ([]lbrecon.Intent, error) {
	j.ev.add("load")
	return j.Journal.Load(ctx)
}

// sharedJournal is a journal on a server every leader reaches (as a
// ConfigMap is): each leader's process has its own client of it, and
// every Load reads what the others recorded.
type sharedJournal struct {
	mu      sync.Mutex
	entries map[string]lbrecon.Intent
}

func entryOf(in lbrecon.Intent) string { return in.Scope + "/" + in.Kind + "/" + in.Name + "/" + in.ID }

func (j *sharedJournal) Load(context.Context) ([]lbrecon.Intent, error) {
	j.mu.Lock()
	defer j.mu.Unlock()
	out := make([]lbrecon.Intent, 0, len(j.entries))
	for _, in := range j.entries {
		out = append(out, in)
	}
	return out, nil
}

func (j *sharedJournal) Record(_ context.Context, intents []lbrecon.Intent) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	for _, in := range intents {
		j.entries[entryOf(in)] = in
	}
	return nil
}

func (j *sharedJournal) Forget(_ context.Context, intents []lbrecon.Intent) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	for _, in := range intents {
		delete(j.entries, entryOf(in))
	}
	return nil
}

// fencedWorld is a provider whose listings lag by 5 s (declared), behind
// a fence in memory that every write is checked against, with one journal
// every leader of the owner reaches.
type fencedWorld struct {
	eng     *lbrecontest.Engine
	fence   *lbrecon.Fence
	ev      *termEvents
	journal *sharedJournal
}

func newFencedWorld() *fencedWorld {
	return &fencedWorld{eng: newEngine(lbrecontest.Config{ListLag: 5 * time.Second, DeclareListLag: true}),
		fence: lbrecon.NewFence("provider", 0, ""), ev: &termEvents{},
		journal: &sharedJournal{entries: map[string]lbrecon.Intent{}}}
}

func (w *fencedWorld) admit(token uint64) error {
	w.ev.add("admit %d", token)
	return w.fence.Admit(token)
}

// reconciler returns a leader's reconciler of lb in w.
func (w *fencedWorld) reconciler(t *testing.T, lb lbrecon.LoadBalancer) *lbrecon.LoadBalancerReconciler {
	eng := lbrecon.Guard(listRecorder{Engine: w.eng, ev: w.ev}, lbrecon.CheckToken(w.fence.Admit))
	return newLB(t, eng, lb, func(c *lbrecon.Config) {
		c.Journal = loadRecorder{Journal: w.journal, ev: w.ev}
		c.Admit = w.admit
	})
}

func term(ctx context.Context, token uint64) context.Context { return lbrecon.WithToken(ctx, token) }

// Each entry point begins a new term with the fence, before it lists or
// loads the journal, and reads the journal again in a later term; a call
// in the term it is in raises nothing.
func TestNewTermRaisesTheFenceBeforeReading(t *testing.T) {
	for _, call := range []struct {
		name string
		do   func(ctx context.Context, r *lbrecon.LoadBalancerReconciler) error
	}{
		{"Reconcile", func(ctx context.Context, r *lbrecon.LoadBalancerReconciler) error { return r.Reconcile(ctx) }},
		{"ReconcileOnce", func(ctx context.Context, r *lbrecon.LoadBalancerReconciler) error {
			_, err := r.ReconcileOnce(ctx)
			return err
		}},
		{"Check", func(ctx context.Context, r *lbrecon.LoadBalancerReconciler) error {
			_, err := r.Check(ctx)
			return err
		}},
		{"TeardownOnce", func(ctx context.Context, r *lbrecon.LoadBalancerReconciler) error {
			_, err := r.TeardownOnce(ctx)
			return err
		}},
	} {
		t.Run(call.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				w := newFencedWorld()
				r := w.reconciler(t, desc(1, 1, 2))
				require.NoError(t, r.Reconcile(term(t.Context(), 3)))
				first := w.ev.take()
				require.Equal(t, []string{"admit 3", "load", "list"}, first[:3], "the first term raises the fence first")

				require.NoError(t, call.do(term(t.Context(), 3), r))
				require.NotContains(t, w.ev.take(), "admit 3", "the same term raises nothing again")

				require.NoError(t, w.fence.Admit(4)) // another leader's term wrote, and ended
				require.NoError(t, call.do(term(t.Context(), 5), r))
				got := w.ev.take()
				require.GreaterOrEqual(t, len(got), 3, "%q", got)
				require.Equal(t, []string{"admit 5", "load", "list"}, got[:3],
					"a new term raises the fence, then reads the journal again, then lists")
				require.ErrorIs(t, w.fence.Admit(4), lbrecon.ErrFenced, "the deposed term is fenced off")
			})
		})
	}
}

// A refused term (the fence holds a later one) reads and writes nothing,
// and the reconciler stays in its term.
func TestRefusedTermReadsNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newFencedWorld()
		lb := desc(1, 1, 2)
		r := w.reconciler(t, lb)
		require.NoError(t, r.Reconcile(term(t.Context(), 3)))
		require.NoError(t, w.fence.Admit(6))
		w.ev.take()
		w.eng.ResetCalls()
		_, err := r.ReconcileOnce(term(t.Context(), 5))
		require.ErrorIs(t, err, lbrecon.ErrFenced)
		require.Equal(t, []string{"admit 5"}, w.ev.take(), "nothing read after the refusal")
		require.Empty(t, w.eng.Calls())
		require.NoError(t, r.Reconcile(term(t.Context(), 6)), "the later term goes on")
		requireConverged(t, w.eng, r, lb)
	})
}

// Term 3's leader converges and keeps its reconciler; term 4's leader
// (another process, same journal) starts a change, its creations not
// listed yet, and dies; term 5 is the first leader's again, with the same
// reconciler. It reads the journal again, so it holds the names term 4 may
// have created until a listing the lag later shows them: no duplicate.
// With term 3's memory (journal read once), it would create them again.
func TestKeptReconcilerHoldsTheOtherTermsCreations(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newFencedWorld()
		small, big := desc(1, 1, 2), desc(2, 1, 3)
		a := w.reconciler(t, small)
		require.NoError(t, a.Reconcile(term(t.Context(), 3)))
		<-time.After(10 * time.Second) // every listing now shows term 3's objects
		require.NoError(t, a.Reconcile(term(t.Context(), 3)))

		b := w.reconciler(t, big)
		for range 2 {
			_, err := b.ReconcileOnce(term(t.Context(), 4))
			require.NoError(t, err)
		}
		created := w.eng.Calls()[lbrecon.VerbCreate]
		intents, err := w.journal.Load(t.Context())
		require.NoError(t, err)
		require.NotEmpty(t, intents, "term 4's creations are in the journal, not listed yet")

		require.NoError(t, a.SetLoadBalancer(big))
		require.NoError(t, a.Reconcile(term(t.Context(), 5)))
		require.Zero(t, duplicates(w.eng), "objects: %v", w.eng.Objects())
		<-time.After(10 * time.Second)
		require.Zero(t, duplicates(w.eng), "objects: %v", w.eng.Objects())
		requireConverged(t, w.eng, a, big)
		require.Len(t, w.eng.Objects(), objectCount(big))
		require.Greater(t, created, 0)

		require.ErrorIs(t, w.fence.Admit(4), lbrecon.ErrFenced, "term 4 is deposed")
	})
}

// A Leftovers kept into a later term waits for a listing the lag after
// that term began before it reports nothing left: a leader of a term in
// between may have created on the old ID, which a listing shows only
// then.
func TestLeftoversKeptAcrossTermsWaitForTheLag(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newFencedWorld()
		cfg := lbrecon.Config{Engine: lbrecon.Guard(w.eng, lbrecon.CheckToken(w.fence.Admit)), Tag: owner,
			Journal: lbrecon.NoJournal, Admit: w.admit}
		sweep, err := lbrecon.NewLeftovers(cfg, "lb-2")
		require.NoError(t, err)
		<-time.After(10 * time.Second)
		res, err := sweep.TeardownOnce(term(t.Context(), 3))
		require.NoError(t, err)
		require.True(t, res.Converged, "nothing left in term 3")

		// Term 4's leader creates on lb-1, the old ID, and is deposed
		// before a listing shows it.
		old := w.reconciler(t, desc(1, 1, 1))
		_, err = old.ReconcileOnce(term(t.Context(), 4))
		require.NoError(t, err)
		require.NotEmpty(t, w.eng.Objects())

		for range 40 {
			res, err = sweep.TeardownOnce(term(t.Context(), 5))
			require.NoError(t, err)
			if res.Converged {
				break
			}
			require.Positive(t, res.RequeueAfter)
			<-time.After(res.RequeueAfter)
		}
		require.True(t, res.Converged)
		require.Empty(t, w.eng.Objects(), "term 4's late creation is torn down")
	})
}

// Term 3's leader creates a server and is deposed before a listing shows
// it; term 4's leader, wanting one server fewer, destroys it; term 5 is the
// first leader's again, with the same reconciler. It plans from what this
// term reads, not from term 3's record of that creation (which would have
// it wait ConfirmTimeout for a server no listing will show), and creates
// the server again within the lag.
func TestKeptReconcilerDropsTheEarlierTermsRecords(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w := newFencedWorld()
		small, big := desc(1, 1, 2), desc(1, 1, 3)
		a := w.reconciler(t, small)
		require.NoError(t, a.Reconcile(term(t.Context(), 3)))
		<-time.After(10 * time.Second)
		require.NoError(t, a.SetLoadBalancer(big))
		_, err := a.ReconcileOnce(term(t.Context(), 3))
		require.NoError(t, err)
		require.Len(t, w.eng.Objects(), objectCount(big), "the third server is created, not listed yet")

		<-time.After(10 * time.Second)
		b := w.reconciler(t, small)
		require.NoError(t, b.Reconcile(term(t.Context(), 4)))
		<-time.After(10 * time.Second)
		require.NoError(t, b.Reconcile(term(t.Context(), 4)))
		require.Len(t, w.eng.Objects(), objectCount(small), "term 4 destroyed it")

		start := time.Now()
		require.NoError(t, a.Reconcile(term(t.Context(), 5)))
		require.Less(t, time.Since(start), 3*5*time.Second, "converged within a few lags, not after ConfirmTimeout")
		<-time.After(10 * time.Second)
		requireConverged(t, w.eng, a, big)
		require.Zero(t, duplicates(w.eng))
	})
}
