package lbrecon_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconkit/reconkit/lbrecon"
	"github.com/reconkit/reconkit/lbrecon/lbrecontest"
)

// A crash in the middle of a teardown, on read replicas whose listings go
// backwards within the declared lag and a provider whose deletion takes
// its time: the next process (a new term, the same journal) either builds
// the load balancer again (a move back) or carries on with the teardown.
// It takes no destroyed object a replica still shows for there, so it
// reports Converged only once the load balancer is built again at the
// provider; it sends no destruction again but one whose acceptance the
// crash kept from the journal (and makes no duplicate while that one is
// refused at first); and the journal is empty once the lag has passed.
func TestCrashMidTeardownJournaledDestructions(t *testing.T) {
	const lag = 3 * time.Second
	for _, crash := range []struct {
		name string
		at   int // the write the process dies at (1: the first destroy); 0: after its first teardown pass
		sent bool
	}{
		{"after a pass", 0, false},
		{"destroy answer lost", 1, true},
		{"destroy not sent", 1, false},
	} {
		for _, next := range []string{"reconcile", "teardown"} {
			t.Run(crash.name+"/"+next, func(t *testing.T) {
				var early, again, lost, dups, left, destroyed int
				for seed := range uint64(inShort(12, 4)) {
					synctest.Test(t, func(t *testing.T) {
						eng := lbrecontest.New(lbrecontest.Config{Latency: 20 * time.Millisecond, ReplicaLag: lag, DeclareListLag: true,
							Seed: seed, DeleteDelay: 2 * time.Second, Integrity: true})
						dl := &destroyLog{Engine: eng, destroyed: map[lbrecon.Key]int{}}
						cr := lbrecontest.NewCrasher(dl)
						path := filepath.Join(t.TempDir(), "journal")
						lb := desc(2, 2, 3)
						newProcess := func() *lbrecon.LoadBalancerReconciler {
							r, err := lbrecon.NewLoadBalancer(lbrecon.Config{Engine: cr, Tag: owner, Journal: lbrecon.NewFileJournal(path)}, lb)
							require.NoError(t, err)
							return r
						}
						// made reports whether lb is built at the provider,
						// leaving out the objects being deleted.
						made := func() bool {
							objs := slices.DeleteFunc(eng.Objects(), func(o lbrecon.Object) bool { return dl.wasDestroyed(o.Key()) })
							return lbrecontest.Converged(lb, owner)(objs)
						}

						// The first process builds it, then begins its teardown.
						r := newProcess()
						ctx := lbrecon.WithToken(t.Context(), 1)
						require.NoError(t, r.Reconcile(ctx))
						<-time.After(2 * lag)
						pctx, cancel := context.WithCancel(ctx)
						if crash.at > 0 {
							cr.Arm(crash.at, crash.sent)
						}
						_, _ = r.TeardownOnce(pctx)
						cancel()
						if crash.at > 0 {
							require.NoError(t, cr.CrashedAt(crash.at, crash.sent))
						}
						destroyed += len(dl.destroyed)
						entries, err := lbrecon.NewFileJournal(path).Load(t.Context())
						require.NoError(t, err)
						for _, in := range entries {
							if in.ID != "" && !in.Destroyed && dl.wasDestroyed(lbrecon.Key{Kind: in.Kind, ID: in.ID}) {
								lost++
							}
						}
						cr.Restart()
						dl.restart()
						if crash.at > 0 && !crash.sent {
							// The destructions the successor sends again
							// fail at first: until one is accepted, the
							// object is in service.
							eng.FailDestroy(func(lbrecon.Object) bool { return true }, 20)
						}

						// The next process, at once.
						r = newProcess()
						ctx = lbrecon.WithToken(t.Context(), 2)
						var convergedAt time.Time
						for calls := 0; calls < 200; calls++ {
							var res lbrecon.Result
							var err error
							if next == "reconcile" {
								res, err = r.ReconcileOnce(ctx)
							} else {
								res, err = r.TeardownOnce(ctx)
							}
							require.NoError(t, err)
							objs := slices.DeleteFunc(eng.Objects(), func(o lbrecon.Object) bool { return dl.wasDestroyed(o.Key()) })
							dups += dupsOn(objs, "lb-1", owner)
							if res.Converged {
								if next == "reconcile" && !made() {
									early++
									t.Logf("seed %d: converged with %s", seed, describeOn(objs, "lb-1"))
								}
								if convergedAt.IsZero() {
									convergedAt = time.Now()
								}
								if time.Since(convergedAt) > 2*lag {
									break
								}
							}
							<-time.After(500 * time.Millisecond)
						}
						require.False(t, convergedAt.IsZero(), "seed %d: never converged", seed)
						if next == "teardown" {
							<-time.After(2 * lag)
							require.Empty(t, onID(eng.Objects(), "lb-1", owner), "seed %d: left behind", seed)
						}
						again += dl.reissues()
						entries, err = lbrecon.NewFileJournal(path).Load(t.Context())
						require.NoError(t, err)
						left += len(entries)
					})
				}
				t.Logf("%d destroyed before the crash (%d accepted and not journaled as such); then %d converged early, %d sent again, %d duplicates, %d journal entries left",
					destroyed, lost, early, again, dups, left)
				require.Positive(t, destroyed+map[bool]int{true: 1}[crash.at > 0 && !crash.sent], "the first process destroyed nothing")
				require.Zero(t, early, "converged while destroyed objects were listed")
				require.LessOrEqual(t, again, lost, "destructions sent again, beyond those whose answer the crash lost")
				require.Zero(t, dups, "duplicates")
				require.Zero(t, left, "journal entries left")
			})
		}
	}
}

// TeardownOnce says when a teardown with a journal waits only for the
// confirmation of its destructions (Result.Confirming): with an empty plan,
// nothing of the owner's at the provider, and RequeueAfter the time left
// to the horizon, within the declared lag and a poll; a call after that
// time converges, and none converges before the lag has passed since the
// listing that first showed the last objects gone.
func TestTeardownOnceSaysWhenOnlyConfirmationIsLeft(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const lag = 2 * time.Second
		eng := lbrecontest.New(lbrecontest.Config{Latency: 10 * time.Millisecond, ListLag: lag, DeclareListLag: true,
			DeleteDelay: time.Second, Integrity: true})
		journal := lbrecon.NewFileJournal(filepath.Join(t.TempDir(), "journal"))
		r, err := lbrecon.NewLoadBalancer(lbrecon.Config{Engine: eng, Tag: owner, Journal: journal}, desc(2, 2, 3))
		require.NoError(t, err)
		ctx := t.Context()
		require.NoError(t, r.Reconcile(ctx))
		var first time.Time // of the first Confirming result
		for calls := 1; ; calls++ {
			require.Less(t, calls, 100)
			res, err := r.TeardownOnce(ctx)
			require.NoError(t, err)
			if res.Converged {
				require.False(t, first.IsZero(), "call %d: converged with no Confirming result before", calls)
				require.GreaterOrEqual(t, time.Since(first), lag, "call %d: converged before the lag passed", calls)
				require.False(t, res.Confirming)
				break
			}
			if res.Confirming {
				if first.IsZero() {
					first = time.Now()
				}
				require.True(t, res.Plan.Empty(), "call %d: Confirming with a plan: %+v", calls, res.Plan)
				require.NoError(t, res.Transient)
				require.Empty(t, onID(eng.Objects(), "lb-1", owner), "call %d: Confirming while the provider holds objects", calls)
				require.Positive(t, res.RequeueAfter)
				require.LessOrEqual(t, res.RequeueAfter, lag+lbrecon.DefaultPollInterval, "call %d", calls)
				require.LessOrEqual(t, time.Since(first)+res.RequeueAfter, lag+lbrecon.DefaultPollInterval, "call %d: beyond the bound", calls)
			} else {
				require.True(t, first.IsZero(), "call %d: no longer Confirming, yet nothing was listed again", calls)
			}
			<-time.After(res.RequeueAfter)
		}
		entries, err := journal.Load(ctx)
		require.NoError(t, err)
		require.Empty(t, entries)
	})
}

// forgetFails is a journal whose Forget fails for ever.
type forgetFails struct{ lbrecon.Journal }

func (forgetFails) Forget(context.Context, []lbrecon.Intent) error {
	return fmt.Errorf("forget: %w", lbrecontest.ErrInjected)
}

// A journal that fails to forget confirmed destructions for ever keeps a
// teardown from converging, and is retried as a failure a wait may cure:
// TeardownOnce reports it in Result.Transient (not Confirming) with a
// growing RequeueAfter, and Teardown waits as long between its tries, so
// that after 30 s of it neither lists more than once a second.
func TestTeardownOnceBacksOffAJournalThatFailsToForget(t *testing.T) {
	for _, mode := range []string{"TeardownOnce", "Teardown"} {
		t.Run(mode, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				eng := lbrecontest.New(lbrecontest.Config{Latency: 10 * time.Millisecond, ListLag: time.Second, DeclareListLag: true, Integrity: true})
				journal := forgetFails{lbrecon.NewFileJournal(filepath.Join(t.TempDir(), "journal"))}
				r, err := lbrecon.NewLoadBalancer(lbrecon.Config{Engine: eng, Tag: owner, Journal: journal, PollInterval: 100 * time.Millisecond}, desc(2, 2, 3))
				require.NoError(t, err)
				ctx := t.Context()
				require.NoError(t, r.Reconcile(ctx))
				start := time.Now()
				var late int // listings after 30 s
				if mode == "TeardownOnce" {
					failed := 0
					for time.Since(start) < 3*time.Minute {
						before := eng.Calls()[lbrecon.VerbList]
						res, err := r.TeardownOnce(ctx)
						require.NoError(t, err)
						require.False(t, res.Converged, "converged with a journal that forgets nothing")
						if res.Transient != nil {
							require.ErrorIs(t, res.Transient, lbrecontest.ErrInjected)
							require.False(t, res.Confirming)
							failed++
						}
						if time.Since(start) > 30*time.Second {
							late += eng.Calls()[lbrecon.VerbList] - before
						}
						<-time.After(res.RequeueAfter)
					}
					require.Positive(t, failed, "no result carried the journal's failure")
				} else {
					lists30 := make(chan int, 1)
					tctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
					defer cancel()
					go func() {
						<-time.After(30 * time.Second)
						lists30 <- eng.Calls()[lbrecon.VerbList]
					}()
					require.ErrorIs(t, r.Teardown(tctx), context.DeadlineExceeded)
					late = eng.Calls()[lbrecon.VerbList] - <-lists30
				}
				perSecond := float64(late) / (time.Since(start) - 30*time.Second).Seconds()
				t.Logf("%d listings in the last %v: %.2f a second", late, time.Since(start)-30*time.Second, perSecond)
				require.LessOrEqual(t, perSecond, 1.0, "listings a second after 30 s of the same failure")
			})
		})
	}
}
