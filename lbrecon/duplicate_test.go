package lbrecon_test

import (
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/require"

	"github.com/reconkit/reconkit/lbrecon"
	"github.com/reconkit/reconkit/lbrecon/lbrecontest"
)

// backendOf returns the stored backend of the first port of lb.
func backendOf(t *testing.T, eng *lbrecontest.Engine, lb lbrecon.LoadBalancer) lbrecon.Object {
	t.Helper()
	for _, o := range eng.Objects() {
		if o.Kind == lbrecon.KindBackend && o.Name == lb.Ports[0].Name+"."+lb.Suffix {
			return o
		}
	}
	t.Fatal("no backend")
	return lbrecon.Object{}
}

// duplicate stores, as an operator (or a lost creation answer) would, a
// copy of o under id ("" for a fresh one): one name, one spec, our tag.
func duplicate(eng *lbrecontest.Engine, o lbrecon.Object, id string) lbrecon.Object {
	c := o
	c.ID, c.State, c.Status = id, lbrecon.StateOK, nil
	return eng.Put(c)
}

// Two owned objects with one name and one spec, both listed at a listing
// past the lag horizon, both exist: the pass keeps one, destroys the
// other through the normal delete path and converges, blocking or one
// pass at a time. Without this every pass fails with ErrInconsistent for
// ever.
func TestDuplicatePastTheLagIsDestroyed(t *testing.T) {
	for _, once := range []bool{false, true} {
		t.Run(map[bool]string{false: "Reconcile", true: "ReconcileOnce"}[once], func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				eng, lb := convergedWithLag(t)
				orig := backendOf(t, eng, lb)
				dup := duplicate(eng, orig, "")
				r := newLB(t, eng, lb, withLag) // a new process: no memory of either
				converge(t, r, once)
				require.Empty(t, stored(eng, []lbrecon.Key{dup.Key()}), "the duplicate is destroyed")
				require.Equal(t, []lbrecon.Key{orig.Key()}, stored(eng, []lbrecon.Key{orig.Key()}), "the one with children is kept")
				requireConverged(t, eng, r, lb)
			})
		})
	}
}

// Of duplicates, the one listed children refer to is kept, even when the
// other has the lowest ID: its children are neither orphaned nor
// re-created.
func TestDuplicateKeptIsTheOneWithChildren(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		eng, lb := convergedWithLag(t)
		orig := backendOf(t, eng, lb)
		children := referring(eng, orig.ID)
		require.NotEmpty(t, children)
		dup := duplicate(eng, orig, "a") // lower than every ID the engine gives
		eng.ResetCalls()

		r := newLB(t, eng, lb, withLag)
		require.NoError(t, r.Reconcile(t.Context()))
		require.Empty(t, stored(eng, []lbrecon.Key{dup.Key()}))
		require.Equal(t, []lbrecon.Key{orig.Key()}, stored(eng, []lbrecon.Key{orig.Key()}))
		require.ElementsMatch(t, children, referring(eng, orig.ID), "its children stay as they were")
		require.Equal(t, 1, eng.Calls()[lbrecon.VerbDestroy], "only the duplicate is destroyed")
		require.Zero(t, eng.Calls()[lbrecon.VerbCreate], "nothing is created again")
		requireConverged(t, eng, r, lb)
	})
}

// Without children on either, the lowest ID is kept: the choice is the
// same in every process.
func TestDuplicateKeptIsTheLowestID(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		eng := newEngine(lbrecontest.Config{})
		lb := desc(1, 1, 1)
		require.NoError(t, newLB(t, eng, lb, withLag).Reconcile(t.Context()))
		var bind lbrecon.Object
		for _, o := range eng.Objects() {
			if o.Kind == lbrecon.KindBind {
				bind = o
			}
		}
		require.NotEmpty(t, bind.ID)
		require.Empty(t, referring(eng, bind.ID))
		low := duplicate(eng, bind, "id-000000") // below every ID the engine gives, of the same length
		r := newLB(t, eng, lb, withLag)
		require.NoError(t, r.Reconcile(t.Context()))
		require.Equal(t, []lbrecon.Key{low.Key()}, stored(eng, []lbrecon.Key{low.Key(), bind.Key()}))
		requireConverged(t, eng, r, lb)
	})
}

// Within the lag two objects alike are not duplicates: one may be an
// object someone else deleted, still shown by a lagging replica. Nothing
// is destroyed before a listing at the horizon still shows both.
func TestDuplicateWithinTheLagIsKept(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		eng, lb := convergedWithLag(t)
		orig := backendOf(t, eng, lb)
		dup := duplicate(eng, orig, "")
		r := newLB(t, eng, lb, withLag)
		waitsOutTheLag(t, eng, r, nil)
		require.Len(t, stored(eng, []lbrecon.Key{orig.Key(), dup.Key()}), 2)
		onceUntilConverged(t, r)
		require.Equal(t, []lbrecon.Key{orig.Key()}, stored(eng, []lbrecon.Key{orig.Key(), dup.Key()}))
	})
}

// A duplicate that shows up after the first listing with objects alike
// set the horizon was not listed then: at the horizon it fails the call,
// and a new horizon starts, so the next calls wait and then remove it,
// instead of failing for ever.
func TestDuplicateAfterTheHorizonWasSetIsRemoved(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		eng, lb := convergedWithLag(t)
		orig := backendOf(t, eng, lb)
		first := duplicate(eng, orig, "")
		r := newLB(t, eng, lb, withLag)
		res, err := r.ReconcileOnce(t.Context())
		require.NoError(t, err)
		require.ErrorIs(t, res.Transient, lbrecon.ErrInconsistent)
		second := duplicate(eng, orig, "") // not listed when the horizon was set
		onceUntilConverged(t, r)
		require.Equal(t, []lbrecon.Key{orig.Key()}, stored(eng, []lbrecon.Key{orig.Key(), first.Key(), second.Key()}))
		requireConverged(t, eng, r, lb)
	})
}
