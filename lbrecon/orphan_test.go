package lbrecon_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconkit/reconkit/lbrecon"
	"github.com/reconkit/reconkit/lbrecon/lbrecontest"
)

// deleteBackend deletes, as an operator would, the backend of the first
// port of lb, with its children left behind (the engine enforces no
// references), and returns its servers, the orphans the plan cannot
// update onto another backend, and its ID.
func deleteBackend(t *testing.T, eng *lbrecontest.Engine, lb lbrecon.LoadBalancer) ([]lbrecon.Key, string) {
	t.Helper()
	var backend lbrecon.Object
	for _, o := range eng.Objects() {
		if o.Kind == lbrecon.KindBackend && o.Name == lb.Ports[0].Name+"."+lb.Suffix {
			backend = o
		}
	}
	require.NotEmpty(t, backend.ID)
	require.True(t, eng.DeleteObject(backend.Key()))
	var orphans []lbrecon.Key
	for _, o := range eng.Objects() {
		if s, ok := o.Spec.(lbrecon.ServerSpec); ok && s.Backend == backend.ID {
			orphans = append(orphans, o.Key())
		}
	}
	require.NotEmpty(t, orphans)
	return orphans, backend.ID
}

// referring returns the stored objects that refer to id.
func referring(eng *lbrecontest.Engine, id string) []lbrecon.Object {
	var out []lbrecon.Object
	for _, o := range eng.Objects() {
		if slices.ContainsFunc(lbrecontest.LoadBalancerRefs(o), func(k lbrecon.Key) bool { return k.ID == id }) {
			out = append(out, o)
		}
	}
	return out
}

// stored reports which of keys the engine still holds.
func stored(eng *lbrecontest.Engine, keys []lbrecon.Key) []lbrecon.Key {
	var out []lbrecon.Key
	for _, o := range eng.Objects() {
		if slices.Contains(keys, o.Key()) {
			out = append(out, o.Key())
		}
	}
	return out
}

// An owned object whose parent an operator deleted is, once a listing
// past the lag horizon still lacks the parent, an orphan: the pass
// destroys it (its children first) through the normal delete path, or
// updates it in place onto the new parent where the plan can (a
// frontend's default backend), makes the tree again, and converges, blocking or one pass at a time.
// Without this, every pass fails with ErrInconsistent for ever.
func TestOwnedOrphanIsDestroyed(t *testing.T) {
	for _, once := range []bool{false, true} {
		t.Run(map[bool]string{false: "Reconcile", true: "ReconcileOnce"}[once], func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				eng, lb := convergedWithLag(t)
				orphans, gone := deleteBackend(t, eng, lb)
				r := newLB(t, eng, lb, withLag) // a new process: no memory of the tree
				converge(t, r, once)
				require.Empty(t, stored(eng, orphans), "the orphan servers are destroyed")
				require.Empty(t, referring(eng, gone), "no object refers to the gone backend (the frontend is updated in place)")
				requireConverged(t, eng, r, lb)
			})
		})
	}
}

// Within the lag a child listed without its parent is not an orphan: the
// parent may be a creation the listing does not show yet. Nothing is
// destroyed before a listing at the horizon (ListLag after the first
// listing without the parent) still lacks it.
func TestOrphanWithinTheLagIsKept(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		eng, lb := convergedWithLag(t)
		orphans, _ := deleteBackend(t, eng, lb)
		r := newLB(t, eng, lb, withLag)
		waitsOutTheLag(t, eng, r, func() { require.ElementsMatch(t, orphans, stored(eng, orphans)) })
		res, err := r.ReconcileOnce(t.Context())
		require.NoError(t, err)
		require.NoError(t, res.Transient)
		require.Positive(t, eng.Calls()[lbrecon.VerbDestroy], "past the horizon the orphans go")
		require.NotEqual(t, orphans, stored(eng, orphans))
	})
}

// foreignOrphans lists, besides its engine's objects, a server of another
// owner and an untagged one, both on a backend that is gone, and records
// every Destroy call.
type foreignOrphans struct {
	*lbrecontest.Engine
	mu        sync.Mutex
	destroyed []lbrecon.Key
}

var foreign = []lbrecon.Object{
	{Kind: lbrecon.KindServer, ID: "foreign-1", Name: "other", Tags: []string{"owner=someone-else"}, State: lbrecon.StateOK,
		Spec: lbrecon.ServerSpec{Backend: "gone-backend", Port: 1}},
	{Kind: lbrecon.KindServer, ID: "foreign-2", Name: "untagged", State: lbrecon.StateOK,
		Spec: lbrecon.ServerSpec{Backend: "gone-backend", Port: 2}},
}

func (f *foreignOrphans) List(ctx context.Context, q lbrecon.Query) ([]lbrecon.Object, error) {
	objs, err := f.Engine.List(ctx, q)
	if err != nil {
		return nil, err
	}
	return append(objs, foreign...), nil
}

func (f *foreignOrphans) Destroy(ctx context.Context, obj lbrecon.Object) error {
	f.mu.Lock()
	f.destroyed = append(f.destroyed, obj.Key())
	f.mu.Unlock()
	return f.Engine.Destroy(ctx, obj)
}

// An object listed without its parent that does not carry this
// reconciler's tag is left alone, within the lag and past it, and does not
// stop the pass.
func TestForeignOrphanIsLeft(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		eng := newEngine(lbrecontest.Config{})
		lb := desc(2, 1, 2)
		f := &foreignOrphans{Engine: eng}
		r := newLB(t, f, lb, withLag)
		require.NoError(t, r.Reconcile(t.Context()))
		<-time.After(3 * orphanLag)
		require.NoError(t, r.Reconcile(t.Context()))
		p, err := r.Check(t.Context())
		require.NoError(t, err)
		require.True(t, p.Empty(), "%+v", p)
		f.mu.Lock()
		defer f.mu.Unlock()
		for _, o := range foreign {
			require.NotContains(t, f.destroyed, o.Key())
		}
	})
}
