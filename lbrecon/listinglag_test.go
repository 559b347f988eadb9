package lbrecon_test

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconkit/reconkit/lbrecon"
	"github.com/reconkit/reconkit/lbrecon/lbrecontest"
)

// Tests of a list lag declared in listings (ListLagListings): a creation
// of unknown outcome holds its name until the reconciler's lag+1-th
// listing started after the call, not for ConfirmTimeout; and a creation
// that did happen is found by that listing, never made twice.

// The declaration reaches the reconciler through the engine, a Guard and
// a Crasher; only an engine whose lag is counted in listings alone
// declares it.
func TestListingLagDeclared(t *testing.T) {
	eng := lbrecontest.New(lbrecontest.Config{LagListings: 2, DeclareListLag: true})
	require.Equal(t, 2, eng.ListLagListings())
	require.Equal(t, 2, lbrecon.Guard(eng, nil).(lbrecon.ListingLagger).ListLagListings())
	require.Equal(t, 2, lbrecontest.NewCrasher(eng).ListLagListings())
	require.Zero(t, lbrecontest.New(lbrecontest.Config{LagListings: 2}).ListLagListings(), "not declared")
	require.Zero(t, lbrecontest.New(lbrecontest.Config{LagListings: 2, ListLag: time.Second, DeclareListLag: true}).ListLagListings(),
		"with a time lag on top, a count is no bound")
	_, err := lbrecon.New(lbrecon.Config{Engine: eng, Tag: owner, Journal: lbrecon.NoJournal, ListLagListings: -1,
		Steps: []lbrecon.Step{{Kind: "k", Plan: func(context.Context, *lbrecon.Observation) (lbrecon.Changes, error) {
			return lbrecon.Changes{}, nil
		}}}})
	require.ErrorIs(t, err, lbrecon.ErrInvalidConfig)
}

// A create that failed (nothing created) on a provider lagging by one or
// two listings: with the lag declared, through the engine, a Guard or a
// Crasher, or configured, the name is held for lag+1 listings, not
// ConfirmTimeout, and the listings come at the poll interval's pace;
// without, for ConfirmTimeout.
func TestDeclaredListingLagEndsTheHold(t *testing.T) {
	for _, tc := range []struct {
		name     string
		lag      int
		declare  bool
		config   int
		wrap     func(lbrecon.Engine) lbrecon.Engine
		shortish bool
	}{
		{"declared", 1, true, 0, nil, true},
		{"declared, two listings", 2, true, 0, nil, true},
		{"declared, guard", 1, true, 0, func(e lbrecon.Engine) lbrecon.Engine { return lbrecon.Guard(e, nil) }, true},
		{"declared, crasher", 1, true, 0, func(e lbrecon.Engine) lbrecon.Engine { return lbrecontest.NewCrasher(e) }, true},
		{"configured", 1, false, 1, nil, true},
		{"unknown", 1, false, 0, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				eng := newEngine(lbrecontest.Config{LagListings: tc.lag, DeclareListLag: tc.declare})
				eng.FailCreate(func(o lbrecon.Object) bool { return o.Kind == lbrecon.KindBackend }, 1, nil)
				var e lbrecon.Engine = eng
				if tc.wrap != nil {
					e = tc.wrap(eng)
				}
				lb := desc(1, 1, 2)
				r := newLB(t, e, lb, func(c *lbrecon.Config) { c.ListLagListings = tc.config })
				start := time.Now()
				require.NoError(t, r.Reconcile(t.Context()))
				t.Logf("converged in %v", time.Since(start))
				if tc.shortish {
					// Polls are not spaced out for writes the listings
					// made so far cannot show yet (39 s with two listings
					// when they were).
					require.Less(t, time.Since(start), 15*time.Second, "held for the declared lag, not ConfirmTimeout")
				} else {
					require.GreaterOrEqual(t, time.Since(start), lbrecon.DefaultConfirmTimeout, "held for ConfirmTimeout")
				}
				require.Equal(t, objectCount(lb)+1, eng.Calls()[lbrecon.VerbCreate], "the failed backend created again, nothing else")
				requireConverged(t, eng, r, lb)
			})
		})
	}
}

// Creations whose answer was lost although they happened, on a provider
// lagging by one or two listings that it declares: each is found by the
// lag+1-th listing after it, never made twice, blocking or one pass at a
// time.
func TestDeclaredListingLagNoDuplicates(t *testing.T) {
	for _, lag := range []int{1, 2} {
		for _, oncePasses := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/lag%d", map[bool]string{false: "Reconcile", true: "ReconcileOnce"}[oncePasses], lag), func(t *testing.T) {
				synctest.Test(t, func(t *testing.T) {
					eng := newEngine(lbrecontest.Config{LagListings: lag, DeclareListLag: true, Integrity: true, UniqueBinds: true})
					eng.LoseCreateAnswers(3)
					lb := desc(2, 2, 3)
					r := newLB(t, eng, lb, nil)
					if oncePasses {
						converged, _ := budgetRun(t, 100, r.ReconcileOnce)
						require.True(t, converged)
					} else {
						require.NoError(t, r.Reconcile(t.Context()))
					}
					require.Zero(t, duplicates(eng))
					requireConverged(t, eng, r, lb)
				})
			})
		}
	}
}
