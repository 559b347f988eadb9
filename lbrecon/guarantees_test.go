package lbrecon_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconkit/reconkit/lbrecon"
	"github.com/reconkit/reconkit/lbrecon/lbrecontest"
)

// calls is an engine that records which of its methods were called, and
// takes every Engine method, Repairer, Updater and IdempotentCreator.
type calls struct {
	mu   sync.Mutex
	seen []string
}

func (e *calls) note(m string) { e.mu.Lock(); e.seen = append(e.seen, m); e.mu.Unlock() }

func (e *calls) got() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.seen...)
}

func (e *calls) List(context.Context, lbrecon.Query) ([]lbrecon.Object, error) {
	e.note("List")
	return nil, nil
}

func (e *calls) Get(_ context.Context, o lbrecon.Object) (lbrecon.Object, error) {
	e.note("Get")
	return o, nil
}

func (e *calls) Create(_ context.Context, o lbrecon.Object) (lbrecon.Object, error) {
	e.note("Create")
	return o, nil
}

func (e *calls) CreateIdempotent(_ context.Context, o lbrecon.Object, _ string) (lbrecon.Object, error) {
	e.note("CreateIdempotent")
	return o, nil
}

func (e *calls) Destroy(context.Context, lbrecon.Object) error { e.note("Destroy"); return nil }

func (e *calls) Tag(context.Context, lbrecon.Object, []string) error { e.note("Tag"); return nil }

func (e *calls) Repair(_ context.Context, o lbrecon.Object) (lbrecon.Object, error) {
	e.note("Repair")
	return o, nil
}

func (e *calls) Update(_ context.Context, _, d lbrecon.Object) (lbrecon.Object, error) {
	e.note("Update")
	return d, nil
}

// Guard runs its check before every write (Create, Destroy, Tag, Update,
// Repair, and a creation with an idempotency token) and lets reads
// through unchecked; a write its check refuses never reaches the engine.
func TestGuardChecksEveryWriteBeforeIt(t *testing.T) {
	inner := &calls{}
	errNo := errors.New("refused")
	var checked []lbrecon.Verb
	g := lbrecon.Guard(inner, func(_ context.Context, v lbrecon.Verb, _ lbrecon.Object) error {
		checked = append(checked, v)
		return errNo
	})
	ctx := t.Context()
	o := lbrecon.Object{Kind: "backend", Name: "b"}
	_, err := g.Create(ctx, o)
	require.ErrorIs(t, err, errNo)
	require.ErrorIs(t, g.Destroy(ctx, o), errNo)
	require.ErrorIs(t, g.Tag(ctx, o, []string{"k=v"}), errNo)
	rep, ok := g.(lbrecon.Repairer)
	require.True(t, ok, "Guard forwards Repairer")
	_, err = rep.Repair(ctx, o)
	require.ErrorIs(t, err, errNo)
	up, ok := g.(lbrecon.Updater)
	require.True(t, ok, "Guard forwards Updater")
	_, err = up.Update(ctx, o, o)
	require.ErrorIs(t, err, errNo)
	ic, ok := g.(lbrecon.IdempotentCreator)
	require.True(t, ok, "Guard forwards IdempotentCreator")
	_, err = ic.CreateIdempotent(ctx, o, "tok")
	require.ErrorIs(t, err, errNo)
	require.Empty(t, inner.got(), "no refused write reaches the engine")
	require.ElementsMatch(t, []lbrecon.Verb{lbrecon.VerbCreate, lbrecon.VerbDestroy, lbrecon.VerbTag, lbrecon.VerbRepair, lbrecon.VerbUpdate, lbrecon.VerbCreate}, checked)

	checked = nil
	_, err = g.List(ctx, lbrecon.Query{})
	require.NoError(t, err)
	_, err = g.Get(ctx, o)
	require.NoError(t, err)
	require.Empty(t, checked, "reads are not checked")
	require.Equal(t, []string{"List", "Get"}, inner.got())
}

// A Fence admits the token it holds and higher ones (raising itself), and
// refuses a lower one with a *FenceError naming both tokens, which is
// ErrFenced; Reset lowers it.
func TestFenceAdmitsEqualAndHigherRefusesLower(t *testing.T) {
	f := lbrecon.NewFence("f", 5, "reset it")
	require.NoError(t, f.Admit(5), "the token the fence holds writes again")
	require.NoError(t, f.Admit(6))
	require.Equal(t, uint64(6), f.Highest())
	err := f.Admit(5)
	require.ErrorIs(t, err, lbrecon.ErrFenced)
	var fe *lbrecon.FenceError
	require.ErrorAs(t, err, &fe)
	require.Equal(t, uint64(6), fe.Stored)
	require.Equal(t, uint64(5), fe.Token)
	require.Contains(t, err.Error(), "reset it")
	require.Equal(t, uint64(6), f.Highest(), "a refusal leaves the fence")
	f.Reset(1)
	require.NoError(t, f.Admit(2))
}

// listsAll is an engine whose List answers every object it holds, another
// owner's included, as a provider that cannot filter by tag does.
type listsAll struct{ *lbrecontest.Engine }

func (e listsAll) List(ctx context.Context, q lbrecon.Query) ([]lbrecon.Object, error) {
	got, err := e.Engine.List(ctx, q)
	if err != nil {
		return nil, err
	}
	seen := make(map[lbrecon.Key]bool, len(got))
	for _, o := range got {
		seen[o.Key()] = true
	}
	for _, o := range e.Objects() {
		if !seen[o.Key()] {
			got = append(got, o)
		}
	}
	return got, nil
}

// Objects with another value of the tag's key are never touched, even
// when the engine lists them: neither destroyed as unwanted, nor taken
// for one of ours, nor torn down.
func TestOtherValueOfTheTagKeyNeverTouched(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		eng := newEngine(lbrecontest.Config{})
		other := eng.Put(lbrecon.Object{Kind: lbrecon.KindBackend, Name: "p9.svc-1", Tags: []string{"owner=svc-2"}, Spec: lbrecon.BackendSpec{LoadBalancer: "lb-1"}})
		r := newLB(t, listsAll{eng}, desc(1, 1, 1), nil)
		require.NoError(t, r.Reconcile(t.Context()))
		require.NoError(t, r.Teardown(t.Context()))
		objs := eng.Objects()
		require.Len(t, objs, 1, "only the other owner's object is left")
		require.Equal(t, other.Key(), objs[0].Key())
		require.Equal(t, []string{"owner=svc-2"}, objs[0].Tags)
	})
}

// Once the engine has shown it takes idempotency tokens, a creation of
// unknown outcome is sent again with its token at ReconcileOnce's next
// call, rather than held until a lagging listing shows it.
func TestReconcileOnceResendsHeldCreationWithItsToken(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		eng := newEngine(lbrecontest.Config{ListLag: time.Hour, Idempotency: true})
		isBackend := func(o lbrecon.Object) bool { return o.Kind == lbrecon.KindBackend }
		eng.FailCreate(isBackend, 1, nil)
		r := newLB(t, eng, desc(1, 1, 1), nil)
		res, err := r.ReconcileOnce(t.Context())
		require.NoError(t, err)
		require.False(t, res.Converged)
		backends := func() int {
			n := 0
			for _, o := range eng.Objects() {
				if isBackend(o) {
					n++
				}
			}
			return n
		}
		require.Zero(t, backends(), "the first creation failed")
		_, err = r.ReconcileOnce(t.Context()) // no time passes: the listing still lags
		require.NoError(t, err)
		require.Equal(t, 1, backends(), "the held creation is sent again with its token at the next call")
	})
}

// goneOnDestroy answers every destruction with not-found, as a provider
// does when the object went away between the listing and the call.
type goneOnDestroy struct{ *lbrecontest.Engine }

func (e goneOnDestroy) Destroy(ctx context.Context, o lbrecon.Object) error {
	if err := e.Engine.Destroy(ctx, o); err != nil {
		return err
	}
	return fmt.Errorf("destroy %v: %w", o, lbrecon.ErrNotFound)
}

// A not-found answer to a destruction is final: the object is gone, which
// is what the destruction wanted, so teardown succeeds without retrying it.
func TestDestroyAnsweredNotFoundIsDone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		eng := newEngine(lbrecontest.Config{})
		lb := desc(1, 1, 2)
		require.NoError(t, newLB(t, eng, lb, nil).Reconcile(t.Context()))
		n := len(eng.Objects())
		require.NotZero(t, n)
		eng.ResetCalls()
		r := newLB(t, goneOnDestroy{eng}, lb, nil)
		require.NoError(t, r.Teardown(t.Context()))
		require.Empty(t, eng.Objects())
		require.Equal(t, n, eng.Calls()[lbrecon.VerbDestroy], "each object destroyed once, not retried")
	})
}
