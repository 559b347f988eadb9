package lbrecontest_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/reconkit/reconkit/lbrecon"
	"github.com/reconkit/reconkit/lbrecon/lbrecontest"
)

// With Integrity, a parent whose asynchronous deletion is pending takes no
// new child, by any path of creation (as a real cloud answers 409 or 400),
// and no child is moved onto it; nor, once its deletion completed, does
// it. Without this a child outlives its parent: an orphan.
func TestNoChildUnderADeletingParent(t *testing.T) {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	e := lbrecontest.New(lbrecontest.Config{Clock: clk, Integrity: true, DeleteDelay: 2 * time.Second, Idempotency: true})
	b, err := e.Create(ctx, backend("b"))
	require.NoError(t, err)
	other, err := e.Create(ctx, backend("other"))
	require.NoError(t, err)
	s, err := e.Create(ctx, server(other.ID, "s"))
	require.NoError(t, err)
	require.NoError(t, e.Destroy(ctx, b))

	check := func(when string) {
		_, err := e.Create(ctx, server(b.ID, "s1"))
		require.ErrorIs(t, err, lbrecon.ErrConflict, "%s: Create", when)
		_, err = e.CreateIdempotent(ctx, server(b.ID, "s2"), "token-"+when)
		require.ErrorIs(t, err, lbrecon.ErrConflict, "%s: CreateIdempotent", when)
		e.FailCreateAfter(nil, 1) // a creation whose answer would be lost
		_, err = e.Create(ctx, server(b.ID, "s3"))
		require.ErrorIs(t, err, lbrecon.ErrConflict, "%s: a creation whose answer is lost", when)
		e.CrashBeforeTag(nil, 1)
		_, err = e.Create(ctx, server(b.ID, "s4"))
		require.ErrorIs(t, err, lbrecon.ErrConflict, "%s: a creation that crashes before its tag", when)
		_, err = e.Update(ctx, s, server(b.ID, "s"))
		require.ErrorIs(t, err, lbrecon.ErrConflict, "%s: Update", when)
		for _, o := range e.Objects() {
			if sp, ok := o.Spec.(lbrecon.ServerSpec); ok {
				require.NotEqual(t, b.ID, sp.Backend, "%s: %v refers to the deleted backend", when, o)
			}
		}
	}
	check("deletion pending")
	clk.Step(2 * time.Second)
	check("deletion complete")
}
