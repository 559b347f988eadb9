package lbrecon_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconkit/reconkit/lbrecon"
	"github.com/reconkit/reconkit/lbrecon/lbrecontest"
)

func TestFileJournalRoundTripAndCorruption(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "lb-1.journal")
	ctx := t.Context()
	j := lbrecon.NewFileJournal(path)
	got, err := j.Load(ctx)
	require.NoError(t, err)
	require.Empty(t, got, "a missing file is an empty journal")

	at := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	a := lbrecon.Intent{Kind: "backend", Name: "a", Spec: "s1", Token: "t1", At: at}
	b := lbrecon.Intent{Kind: "server", Name: "b", Spec: "s2", Token: "t2", At: at}
	require.NoError(t, j.Record(ctx, []lbrecon.Intent{a, b}))
	// A leftover temporary file of a crashed write changes nothing.
	require.NoError(t, os.WriteFile(path+".tmp-123", []byte("{garbage"), 0o600))
	got, err = lbrecon.NewFileJournal(path).Load(ctx)
	require.NoError(t, err)
	require.ElementsMatch(t, []lbrecon.Intent{a, b}, got, "read back by another process")

	require.NoError(t, j.Forget(ctx, []lbrecon.Intent{{Kind: "backend", Name: "a"}}))
	got, err = lbrecon.NewFileJournal(path).Load(ctx)
	require.NoError(t, err)
	require.Equal(t, []lbrecon.Intent{b}, got)
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, entries, 2, "no temporary file of its own left behind")

	for name, content := range map[string]string{
		"not JSON":        "{garbage",
		"another version": `{"version":2,"intents":[]}`,
		"no name":         `{"version":1,"intents":[{"kind":"backend","at":"2030-01-01T00:00:00Z"}]}`,
	} {
		require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
		_, err := lbrecon.NewFileJournal(path).Load(ctx)
		require.ErrorIs(t, err, lbrecon.ErrCorruptJournal, name)
		require.Contains(t, err.Error(), path)
	}
}

// failingJournal refuses to record.
type failingJournal struct{ lbrecon.Journal }

var errDiskFull = errors.New("disk full")

func (failingJournal) Record(context.Context, []lbrecon.Intent) error { return errDiskFull }

// No creation is sent before its intent is durable.
func TestNoCreateWithoutARecordedIntent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		eng := newEngine(lbrecontest.Config{})
		j := failingJournal{lbrecon.NewFileJournal(filepath.Join(t.TempDir(), "j"))}
		r := newLB(t, eng, desc(1, 1, 1), func(c *lbrecon.Config) { c.Journal = j })
		res, err := r.ReconcileOnce(t.Context())
		require.NoError(t, err)
		require.ErrorIs(t, res.Transient, errDiskFull, "retried by the next call")
		require.Positive(t, res.RequeueAfter)
		require.Zero(t, eng.Calls()[lbrecon.VerbCreate])
	})
}

// A process that died after its creations were sent, on a provider whose
// listings lag: the next process holds the names the journal recorded
// until the listing shows the objects, and creates nothing twice. With
// idempotency tokens, it sends them again with the recorded tokens once
// the engine has shown it takes them.
func TestRestartedReconcilerRecognisesItsPredecessorsCreations(t *testing.T) {
	for _, tc := range []struct {
		name    string
		idem    bool
		listLag time.Duration // the reconciler's; the provider's is 5 s
	}{
		{"journal", false, 5 * time.Second},
		{"journal without a list lag bound", false, 0},
		{"journal and tokens", true, 5 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				eng := newEngine(lbrecontest.Config{ListLag: 5 * time.Second, Idempotency: tc.idem})
				path := filepath.Join(t.TempDir(), "lb-1.journal")
				lb := desc(2, 1, 2)
				mk := func() *lbrecon.LoadBalancerReconciler {
					return newLB(t, eng, lb, func(c *lbrecon.Config) {
						c.Journal = lbrecon.NewFileJournal(path)
						c.ListLag = tc.listLag
					})
				}
				// The backends are created, a second pass finds them not
				// listed yet; then the process dies.
				first := mk()
				for range 2 {
					_, err := first.ReconcileOnce(t.Context())
					require.NoError(t, err)
				}
				require.Equal(t, 2, eng.Calls()[lbrecon.VerbCreate])
				intents, err := lbrecon.NewFileJournal(path).Load(t.Context())
				require.NoError(t, err)
				require.Len(t, intents, 2, "recorded, and kept until a listing shows them")

				r := mk()
				require.NoError(t, r.Reconcile(t.Context()))
				requireConverged(t, eng, r, lb)
				require.Len(t, eng.Objects(), objectCount(lb), "no duplicate")
				intents, err = lbrecon.NewFileJournal(path).Load(t.Context())
				require.NoError(t, err)
				require.Empty(t, intents, "forgotten once listed")
			})
		})
	}
}

// With the provider's list lag known, a creation that failed transiently
// holds its name only until a listing made that long after the call, not
// for ConfirmTimeout; a lost answer is still recognised, not duplicated.
func TestListLagEndsTheHoldOfAnUnknownOutcome(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		eng := newEngine(lbrecontest.Config{ListLag: time.Second})
		eng.FailCreate(func(o lbrecon.Object) bool { return o.Kind == lbrecon.KindBackend }, 1, nil)
		eng.FailCreateAfter(func(o lbrecon.Object) bool { return o.Kind == lbrecon.KindServer }, 1)
		lb := desc(1, 1, 2)
		r := newLB(t, eng, lb, func(c *lbrecon.Config) {
			c.ConfirmTimeout = 30 * time.Second
			c.ListLag = time.Second
		})
		start := time.Now()
		require.NoError(t, r.Reconcile(t.Context()))
		require.Less(t, time.Since(start), 15*time.Second, "held for the list lag, not ConfirmTimeout")
		require.Equal(t, objectCount(lb)+1, eng.Calls()[lbrecon.VerbCreate], "the failed backend created again, nothing else")
		requireConverged(t, eng, r, lb)
	})
}

// Leftovers given a load balancer reconciler's configuration leaves its
// journal alone.
func TestLeftoversLeaveTheJournalAlone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		eng := newEngine(lbrecontest.Config{ListLag: 5 * time.Second})
		path := filepath.Join(t.TempDir(), "lb-1.journal")
		cfg := lbrecon.Config{Engine: eng, Tag: owner, Journal: lbrecon.NewFileJournal(path)}
		r, err := lbrecon.NewLoadBalancer(cfg, desc(1, 1, 1))
		require.NoError(t, err)
		_, err = r.ReconcileOnce(t.Context())
		require.NoError(t, err)
		<-time.After(3 * time.Minute) // past ConfirmTimeout: a reconciler would forget the intent
		require.NoError(t, lbrecon.TeardownExcept(t.Context(), cfg, "lb-1"))
		intents, err := lbrecon.NewFileJournal(path).Load(t.Context())
		require.NoError(t, err)
		require.Len(t, intents, 1)
	})
}

// A restarted reconciler's Check knows its predecessor's creations from
// the journal: on a lagging listing it does not plan to create them again,
// but reports them as unconfirmed.
func TestCheckLoadsTheJournal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		eng := newEngine(lbrecontest.Config{ListLag: 5 * time.Second})
		path := filepath.Join(t.TempDir(), "lb-1.journal")
		lb := desc(2, 1, 1)
		mk := func() *lbrecon.LoadBalancerReconciler {
			return newLB(t, eng, lb, func(c *lbrecon.Config) {
				c.Journal = lbrecon.NewFileJournal(path)
				c.ListLag = 5 * time.Second
			})
		}
		_, err := mk().ReconcileOnce(t.Context())
		require.NoError(t, err)
		require.Equal(t, 2, eng.Calls()[lbrecon.VerbCreate], "the backends")

		p, err := mk().Check(t.Context())
		require.NoError(t, err)
		require.Empty(t, p.Create, "the predecessor's backends are held by the journal")
		require.Len(t, p.Unconfirmed, 2)
	})
}

// Entries are kept per scope: one kind and name recorded by two scopes
// are two entries, and forgetting one leaves the other.
func TestFileJournalKeepsScopesApart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "j")
	j := lbrecon.NewFileJournal(path)
	at := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	a := lbrecon.Intent{Scope: "lb-1", Kind: lbrecon.KindBackend, Name: "p0.svc-1", Spec: "x", Token: "a", At: at}
	b := a
	b.Scope, b.Token = "lb-2", "b"
	require.NoError(t, j.Record(t.Context(), []lbrecon.Intent{a}))
	require.NoError(t, j.Record(t.Context(), []lbrecon.Intent{b}))
	got, err := lbrecon.NewFileJournal(path).Load(t.Context())
	require.NoError(t, err)
	require.ElementsMatch(t, []lbrecon.Intent{a, b}, got)
	require.NoError(t, j.Forget(t.Context(), []lbrecon.Intent{b}))
	got, err = lbrecon.NewFileJournal(path).Load(t.Context())
	require.NoError(t, err)
	require.Equal(t, []lbrecon.Intent{a}, got)
}

// The old and the new load balancer's reconcilers share one journal and
// use the same object names. The old one's creations lost their answers
// and the process died; the new one then records, creates and forgets
// the same names on its own ID. The old ID's next process still finds
// its predecessor's entries, and holds those names while the listing
// lags instead of creating them again.
func TestJournalScopesDoNotOverwriteEachOther(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		eng := newEngine(lbrecontest.Config{ListLag: 3 * time.Second, DeclareListLag: true})
		onOld := func(o lbrecon.Object) bool {
			s, ok := o.Spec.(lbrecon.BackendSpec)
			return ok && s.LoadBalancer == "lb-1"
		}
		eng.FailCreateAfter(onOld, 2) // both backends of lb-1 created, answers lost
		j := lbrecon.NewFileJournal(filepath.Join(t.TempDir(), "j"))
		old, now := desc(2, 1, 1), moved(desc(2, 1, 1), "lb-2")
		withJournal := func(c *lbrecon.Config) { c.Journal = j }

		res, err := newLB(t, eng, old, withJournal).ReconcileOnce(t.Context()) // then the process dies
		require.NoError(t, err)
		require.Error(t, res.Transient)
		_, err = newLB(t, eng, now, withJournal).ReconcileOnce(t.Context())
		require.NoError(t, err)

		r := newLB(t, eng, old, withJournal)
		require.NoError(t, r.Reconcile(t.Context()))
		creates := 0 // the names are the same on both IDs: count the old ID's
		for _, o := range eng.Objects() {
			if onOld(o) {
				creates++
			}
		}
		require.Equal(t, 2, creates, "the old ID's backends made once")
	})
}

// A reconciler loads only its own scope's entries from a shared journal:
// it neither holds another scope's names nor forgets its entries.
func TestJournalLoadsOnlyItsScope(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		eng := newEngine(lbrecontest.Config{ListLag: 3 * time.Second, DeclareListLag: true})
		eng.LoseCreateAnswers(1) // every creation's answer is lost
		j := lbrecon.NewFileJournal(filepath.Join(t.TempDir(), "j"))
		other := moved(desc(1, 1, 1), "lb-2")
		other.Suffix = "svc-2"
		withJournal := func(c *lbrecon.Config) { c.Journal = j }
		_, err := newLB(t, eng, other, withJournal).ReconcileOnce(t.Context()) // then the process dies
		require.NoError(t, err)
		recorded, err := j.Load(t.Context())
		require.NoError(t, err)
		require.NotEmpty(t, recorded)

		r := newLB(t, eng, desc(1, 1, 1), withJournal)
		p, err := r.Check(t.Context())
		require.NoError(t, err)
		for _, o := range p.Unconfirmed {
			require.NotContains(t, o.Name, "svc-2", "another scope's name held")
		}
		_, err = r.ReconcileOnce(t.Context())
		require.NoError(t, err)
		<-time.After(10 * time.Second) // past the lag
		_, err = r.ReconcileOnce(t.Context())
		require.NoError(t, err)
		left, err := j.Load(t.Context())
		require.NoError(t, err)
		require.Subset(t, left, recorded, "another scope's entries forgotten")
	})
}

// A journal file is outside input: whatever it holds, Load returns
// intents that each have a kind, a name and a time, or an error wrapping
// ErrCorruptJournal (or a read error), never a panic; what it returns
// survives a Record and a reload unchanged.
func FuzzFileJournalLoad(f *testing.F) {
	f.Add([]byte(`{"version":1,"intents":[{"scope":"lb-1","kind":"backend","name":"p0.svc-1","spec":"x","token":"t","at":"2030-01-01T00:00:00Z"}]}`))
	f.Add([]byte(`{"version":1,"intents":[{"kind":"backend","name":"p0.svc-1","spec":"x","token":"t","at":"2030-01-01T00:00:00Z"}]}`))
	f.Add([]byte(`{"version":2,"intents":[]}`))
	f.Add([]byte(`{"version":1,"intents":[{"kind":"","name":"n","at":"2030-01-01T00:00:00Z"}]}`))
	f.Add([]byte(`not json`))
	f.Fuzz(func(t *testing.T, b []byte) {
		path := filepath.Join(t.TempDir(), "j")
		require.NoError(t, os.WriteFile(path, b, 0o600))
		j := lbrecon.NewFileJournal(path)
		got, err := j.Load(t.Context())
		if err != nil {
			require.ErrorIs(t, err, lbrecon.ErrCorruptJournal)
			return
		}
		for _, in := range got {
			require.NotEmpty(t, in.Kind)
			require.NotEmpty(t, in.Name)
			require.False(t, in.At.IsZero())
		}
		require.NoError(t, j.Record(t.Context(), nil))
		again, err := lbrecon.NewFileJournal(path).Load(t.Context())
		require.NoError(t, err)
		require.Len(t, again, len(got))
	})
}
