package lbrecontest_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reconkit/reconkit/lbrecon"
	"github.com/reconkit/reconkit/lbrecon/lbrecontest"
)

// createLikeTheReconciler sends a creation the way lbrecon does: with a
// token, and with Create when the engine answers that it takes none.
func createLikeTheReconciler(ctx context.Context, c *lbrecontest.Crasher, o lbrecon.Object) error {
	_, err := c.CreateIdempotent(ctx, o, "token-"+o.Name)
	if errors.Is(err, lbrecon.ErrNotSupported) {
		_, err = c.Create(ctx, o)
	}
	return err
}

func crashed(c *lbrecontest.Crasher) bool {
	select {
	case <-c.Crashed():
		return true
	default:
		return false
	}
}

// The probe an engine without tokens answers with ErrNotSupported is not
// a write: "crash after the first create" creates one object, "crash
// before it" none; with tokens, the token's creation is the write.
func TestCrasherProbeIsNotAWrite(t *testing.T) {
	for _, tc := range []struct {
		name        string
		idempotency bool
		after       bool
		objects     int
	}{
		{"no tokens, after", false, true, 1},
		{"no tokens, before", false, false, 0},
		{"tokens, after", true, true, 1},
		{"tokens, before", true, false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := lbrecontest.New(lbrecontest.Config{Idempotency: tc.idempotency})
			c := lbrecontest.NewCrasher(e)
			c.Arm(1, tc.after)
			err := createLikeTheReconciler(t.Context(), c, backend("b"))
			require.ErrorIs(t, err, lbrecontest.ErrProcessCrashed)
			require.True(t, crashed(c), "crashed at the first create")
			require.Len(t, e.Objects(), tc.objects)
			require.Equal(t, 1, c.Writes())
			require.Equal(t, tc.objects, c.Sent())
			p, ok := c.Point()
			require.True(t, ok)
			require.Equal(t, lbrecontest.CrashPoint{Verb: lbrecon.VerbCreate, Object: backend("b"), Sent: tc.after}, p)
		})
	}
}

// Creations sent in parallel, each probing first: the crash comes at the
// n-th creation that reached the engine, whatever the probes do.
func TestCrasherParallelProbes(t *testing.T) {
	for n := 1; n <= 4; n++ {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			e := lbrecontest.New(lbrecontest.Config{})
			c := lbrecontest.NewCrasher(e)
			c.Arm(n, true)
			var wg sync.WaitGroup
			for i := range 8 {
				wg.Go(func() { _ = createLikeTheReconciler(t.Context(), c, backend(fmt.Sprint("b", i))) })
			}
			wg.Wait()
			require.True(t, crashed(c))
			require.Len(t, e.Objects(), n)
			require.Equal(t, n, c.Sent())
			p, ok := c.Point()
			require.True(t, ok)
			require.True(t, p.Sent)
			require.Equal(t, lbrecon.VerbCreate, p.Verb)
			found := false
			for _, o := range e.Objects() {
				found = found || o.Name == p.Object.Name
			}
			require.True(t, found, "the crash point's object %v at the engine", p)
		})
	}
}
