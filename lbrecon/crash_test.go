package lbrecon_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconkit/reconkit/lbrecon"
	"github.com/reconkit/reconkit/lbrecon/lbrecontest"
)

// Crash tests: a process that converges a load balancer dies at a crash
// point, and the next process, with no memory, converges it, on a provider
// whose listings lag by 3 s (one poll or more) and which loses one create
// answer in 11. Duplicates are objects of one kind and name found
// together at the end; ErrInconsistent answers are counted as they come.

// crashSetup is how the reconcilers of a crash run are built.
type crashSetup struct {
	name       string
	journal    bool // a FileJournal, and the provider's list lag as ListLag
	idempotent bool // the provider takes idempotency tokens
	oneListing bool // the provider lags by one listing instead of 3 s (no ListLag bound)
	declared   bool // the provider declares its lag (in listings with oneListing)
}

type crashOutcome struct {
	dups, inconsistent int
	converged          bool
	took               time.Duration // from the restart to convergence
}

const crashLag = 3 * time.Second

var debugCrash = false

// crashRun converges desc(2, 2, 3) with a crash: at the n-th write (the
// write reaching the provider when after), or, with n == 0, at time at.
func crashRun(t *testing.T, s crashSetup, n int, after bool, at time.Duration) crashOutcome {
	var out crashOutcome
	synctest.Test(t, func(t *testing.T) {
		cfg := lbrecontest.Config{Latency: 20 * time.Millisecond, Pending: time.Second,
			ListLag: crashLag, DeleteDelay: 2 * time.Second, Integrity: true, UniqueBinds: true, Idempotency: s.idempotent,
			DeclareListLag: s.declared}
		if s.oneListing {
			cfg.ListLag, cfg.LagListings = 0, 1
		}
		eng := lbrecontest.New(cfg)
		eng.LoseCreateAnswers(11)
		cr := lbrecontest.NewCrasher(eng)
		lb := desc(2, 2, 3)
		path := filepath.Join(t.TempDir(), "lb-1.journal")
		process := func() *lbrecon.LoadBalancerReconciler {
			return newLB(t, cr, lb, func(c *lbrecon.Config) {
				if s.journal {
					c.Journal = lbrecon.NewFileJournal(path) // read afresh by each process
					if !s.oneListing {
						c.ListLag = crashLag
					}
				}
			})
		}
		count := func(err error) {
			if errors.Is(err, lbrecon.ErrInconsistent) {
				out.inconsistent++
			}
		}

		t0 := time.Now()
		crashed := cr.Crashed()
		if n > 0 {
			crashed = cr.Arm(n, after)
		} else {
			timer := time.AfterFunc(at, cr.Crash)
			defer timer.Stop()
		}
		ctx, cancel := context.WithCancel(t.Context())
		watched := make(chan struct{})
		go func() {
			defer close(watched)
			select {
			case <-crashed:
				cancel()
			case <-ctx.Done():
			}
		}()
		count(process().Reconcile(ctx))
		cancel()
		<-watched
		if n > 0 {
			requireCrashedAt(t, cr, eng, n, after)
		}

		cr.Restart()
		if debugCrash {
			b, _ := os.ReadFile(path)
			t.Logf("journal after the crash at %v: %s", time.Since(t0), b)
			for _, o := range eng.Objects() {
				t.Logf("  %v %v %v", o, o.State, o.Tags)
			}
		}
		start := time.Now()
		r := process()
		for range 5 {
			err := r.Reconcile(t.Context())
			count(err)
			if err == nil {
				out.converged = true
				break
			}
		}
		out.took = time.Since(start)
		names := map[string]int{}
		for _, o := range eng.Objects() {
			names[o.Kind+"/"+o.Name]++
		}
		for _, k := range names {
			out.dups += k - 1
		}
		if debugCrash && out.dups > 0 {
			for _, o := range eng.Objects() {
				t.Logf("  end %v %v %v", o, o.State, o.Tags)
			}
		}
	})
	return out
}

// requireCrashedAt fails t unless cr crashed where a test armed it: at
// the n-th write, which reached the provider (eng, as it is at the crash)
// only when after, and, for a creation, left its object there exactly
// then.
func requireCrashedAt(t *testing.T, cr *lbrecontest.Crasher, eng *lbrecontest.Engine, n int, after bool) {
	t.Helper()
	require.NoError(t, cr.CrashedAt(n, after))
	p, _ := cr.Point()
	if p.Verb == lbrecon.VerbCreate {
		at := 0
		for _, o := range eng.Objects() {
			if o.Kind == p.Object.Kind && o.Name == p.Object.Name {
				at++
			}
		}
		require.Equal(t, btoi(after), at, "objects at the provider of the crash point %v", p)
	}
}

// writesOfAConverge counts the writes of a converge without a crash.
func writesOfAConverge(t *testing.T) int {
	var n int
	synctest.Test(t, func(t *testing.T) {
		eng := lbrecontest.New(lbrecontest.Config{Latency: 20 * time.Millisecond, Pending: time.Second,
			ListLag: crashLag, DeleteDelay: 2 * time.Second, Integrity: true, UniqueBinds: true})
		eng.LoseCreateAnswers(11)
		cr := lbrecontest.NewCrasher(eng)
		require.NoError(t, newLB(t, cr, desc(2, 2, 3), nil).Reconcile(t.Context()))
		n = cr.Writes()
	})
	return n
}

var crashSetups = []crashSetup{
	{name: "memory only"},
	{name: "file journal", journal: true},
	{name: "file journal and idempotency tokens", journal: true, idempotent: true},
	{name: "one-listing lag, memory only", oneListing: true},
	{name: "one-listing lag, file journal", journal: true, oneListing: true},
	{name: "one-listing lag declared, file journal", journal: true, oneListing: true, declared: true},
}

// Every crash point of a converge: before and after each write. Under
// -short, the setups without a journal (which assert nothing: they show
// what the journal prevents) are left out, and each of the four with one
// crashes at every fourth write, from its own first, so that every write
// is still a crash point of one setup.
func TestCrashAtEveryWriteNoDuplicates(t *testing.T) {
	writes := writesOfAConverge(t)
	require.Positive(t, writes)
	i := -1 // the setup's place among those with a journal
	for _, s := range crashSetups {
		if testing.Short() && !s.journal {
			continue
		}
		i++
		t.Run(s.name, func(t *testing.T) {
			var points, dupRuns, dups, incons, unconverged int
			var worst time.Duration
			for n := 1 + inShort(0, i%4); n <= writes; n += inShort(1, 4) {
				for _, after := range []bool{false, true} {
					var o crashOutcome
					t.Run(fmt.Sprintf("write%d/after=%v", n, after), func(t *testing.T) { o = crashRun(t, s, n, after, 0) })
					points++
					dups += o.dups
					incons += o.inconsistent
					if o.dups > 0 || o.inconsistent > 0 {
						dupRuns++
					}
					if !o.converged {
						unconverged++
					}
					worst = max(worst, o.took)
				}
			}
			t.Logf("%s: %d crash points: %d with duplicates or ErrInconsistent (%d duplicates, %d ErrInconsistent), %d not converged after the restart; slowest convergence after a restart %v",
				s.name, points, dupRuns, dups, incons, unconverged, worst)
			if s.journal {
				require.Zero(t, dups)
				require.Zero(t, incons)
				require.Zero(t, unconverged)
			}
		})
	}
}

// Forty crashes at random times of a converge (under -short, six, and
// only with a journal).
func TestCrashAtRandomTimesNoDuplicates(t *testing.T) {
	for _, s := range crashSetups {
		if testing.Short() && !s.journal {
			continue
		}
		t.Run(s.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(25, 1))
			var dupRuns, dups, incons, unconverged int
			n := inShort(40, 6)
			for i := range n {
				at := time.Duration(rng.Int64N(int64(15 * time.Second)))
				var o crashOutcome
				t.Run(fmt.Sprint(i), func(t *testing.T) { o = crashRun(t, s, 0, false, at) })
				dups += o.dups
				incons += o.inconsistent
				if o.dups > 0 || o.inconsistent > 0 {
					dupRuns++
				}
				if !o.converged {
					unconverged++
				}
			}
			t.Logf("%s: %d random crashes: %d with duplicates or ErrInconsistent (%d duplicates, %d ErrInconsistent), %d not converged",
				s.name, n, dupRuns, dups, incons, unconverged)
			if s.journal {
				require.Zero(t, dups)
				require.Zero(t, incons)
				require.Zero(t, unconverged)
			}
		})
	}
}
