package lbrecon_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/require"

	"github.com/reconkit/reconkit/backoff"
	"github.com/reconkit/reconkit/lbrecon"
	"github.com/reconkit/reconkit/lbrecon/lbrecontest"
)

// tokens records the fencing token every engine call's context carries.
type tokens struct {
	*lbrecontest.Engine
	mu   sync.Mutex
	seen map[lbrecon.Verb][]uint64 // 0: none
}

func (e *tokens) note(ctx context.Context, v lbrecon.Verb) {
	tok, _ := lbrecon.TokenFrom(ctx)
	e.mu.Lock()
	defer e.mu.Unlock()
	e.seen[v] = append(e.seen[v], tok)
}

func (e *tokens) List(ctx context.Context, q lbrecon.Query) ([]lbrecon.Object, error) {
	e.note(ctx, lbrecon.VerbList)
	return e.Engine.List(ctx, q)
}

func (e *tokens) Get(ctx context.Context, o lbrecon.Object) (lbrecon.Object, error) {
	e.note(ctx, lbrecon.VerbGet)
	return e.Engine.Get(ctx, o)
}

func (e *tokens) Create(ctx context.Context, o lbrecon.Object) (lbrecon.Object, error) {
	e.note(ctx, lbrecon.VerbCreate)
	return e.Engine.Create(ctx, o)
}

func (e *tokens) Destroy(ctx context.Context, o lbrecon.Object) error {
	e.note(ctx, lbrecon.VerbDestroy)
	return e.Engine.Destroy(ctx, o)
}

func (e *tokens) Tag(ctx context.Context, o lbrecon.Object, tags []string) error {
	e.note(ctx, lbrecon.VerbTag)
	return e.Engine.Tag(ctx, o, tags)
}

func (e *tokens) Update(ctx context.Context, cur, desired lbrecon.Object) (lbrecon.Object, error) {
	e.note(ctx, lbrecon.VerbUpdate)
	return e.Engine.Update(ctx, cur, desired)
}

func (e *tokens) Repair(ctx context.Context, o lbrecon.Object) (lbrecon.Object, error) {
	e.note(ctx, lbrecon.VerbRepair)
	return e.Engine.Repair(ctx, o)
}

// The token put in the context with WithToken reaches every engine call of
// every entry point, Guard and the fan-out included.
func TestTokenReachesEveryEngineCall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		inner := realistic(func(c *lbrecontest.Config) { c.Repair = true })
		eng := &tokens{Engine: inner, seen: map[lbrecon.Verb][]uint64{}}
		inner.CrashBeforeTag(isServer("node1"), 1) // adopted later: Tag
		inner.TurnFailed(isServer("node0"), 1)     // repaired: Repair
		lb := desc(1, 1, 3)
		r := newLB(t, lbrecon.Guard(eng, nil), lb, nil)
		ctx := lbrecon.WithToken(t.Context(), 7)
		_ = r.Reconcile(ctx) // the crash is reported; the next call adopts
		require.NoError(t, r.Reconcile(ctx))
		lb.Ports[0].NodePort = 31000 // Update
		require.NoError(t, r.SetLoadBalancer(lb))
		require.NoError(t, r.Reconcile(ctx))
		_, err := r.ReconcileOnce(ctx)
		require.NoError(t, err)
		_, err = r.Check(ctx)
		require.NoError(t, err)
		_, err = r.Status(ctx)
		require.NoError(t, err)
		require.NoError(t, r.Teardown(ctx)) // Destroy
		_, err = r.TeardownOnce(ctx)
		require.NoError(t, err)

		eng.mu.Lock()
		defer eng.mu.Unlock()
		for _, v := range []lbrecon.Verb{lbrecon.VerbList, lbrecon.VerbCreate, lbrecon.VerbTag, lbrecon.VerbRepair, lbrecon.VerbUpdate, lbrecon.VerbDestroy} {
			require.NotEmpty(t, eng.seen[v], "no %s call made", v)
		}
		for v, toks := range eng.seen {
			for _, tok := range toks {
				require.Equal(t, uint64(7), tok, "a %s call without the token", v)
			}
		}
	})
}

// CheckToken refuses writes without a token, and writes whose token the
// admit function finds stale, before they reach the engine.
func TestCheckTokenFencesStaleWriters(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		eng := newEngine(lbrecontest.Config{})
		var mu sync.Mutex
		var highest uint64
		errStale := errors.New("stale fencing token")
		admit := func(token uint64) error { // what a provider with conditional writes does
			mu.Lock()
			defer mu.Unlock()
			if token < highest {
				return backoff.Permanent(fmt.Errorf("%w: %d < %d", errStale, token, highest))
			}
			highest = token
			return nil
		}
		guarded := lbrecon.Guard(eng, lbrecon.CheckToken(admit))
		lb := desc(1, 1, 2)

		r := newLB(t, guarded, lb, nil)
		err := r.Reconcile(t.Context())
		require.ErrorIs(t, err, lbrecon.ErrNoToken)
		require.Zero(t, eng.Calls()[lbrecon.VerbCreate], "a write without a token never reaches the engine")

		require.NoError(t, r.Reconcile(lbrecon.WithToken(t.Context(), 2)), "term 2 reconciles")
		n := len(eng.Objects())

		lb.Ports = nil
		deposed := newLB(t, guarded, lb, nil)
		eng.ResetCalls()
		require.ErrorIs(t, deposed.Reconcile(lbrecon.WithToken(t.Context(), 1)), errStale, "term 1 is deposed")
		require.Zero(t, eng.Calls()[lbrecon.VerbDestroy])
		require.Len(t, eng.Objects(), n)
	})
}
