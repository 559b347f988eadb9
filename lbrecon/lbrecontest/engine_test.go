package lbrecontest_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/reconkit/reconkit/lbrecon"
	"github.com/reconkit/reconkit/lbrecon/lbrecontest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const tag = "owner=a"

func backend(name string) lbrecon.Object {
	return lbrecon.Object{Kind: lbrecon.KindBackend, Name: name, Tags: []string{tag}, Spec: lbrecon.BackendSpec{LoadBalancer: "lb"}}
}

func TestLatency(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := lbrecontest.New(lbrecontest.Config{Latency: 20 * time.Millisecond})
		start := time.Now()
		o, err := e.Create(t.Context(), backend("b"))
		require.NoError(t, err)
		require.Equal(t, 20*time.Millisecond, time.Since(start), "a call takes the configured latency")
		require.NotEmpty(t, o.ID)
	})
}

func TestPendingAndCounters(t *testing.T) {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	e := lbrecontest.New(lbrecontest.Config{Clock: clk, Pending: time.Second})
	o, err := e.Create(ctx, backend("b"))
	require.NoError(t, err)
	require.Equal(t, lbrecon.StatePending, o.State)

	clk.Step(999 * time.Millisecond)
	got, err := e.Get(ctx, o)
	require.NoError(t, err)
	require.Equal(t, lbrecon.StatePending, got.State, "still pending before the period ends")
	clk.Step(time.Millisecond)
	got, err = e.Get(ctx, o)
	require.NoError(t, err)
	require.Equal(t, lbrecon.StateOK, got.State)

	list, err := e.List(ctx, lbrecon.Query{Tag: tag})
	require.NoError(t, err)
	require.Len(t, list, 1)
	list, err = e.List(ctx, lbrecon.Query{Tag: "owner=b"})
	require.NoError(t, err)
	require.Empty(t, list, "other owners' objects are not listed")

	require.NoError(t, e.Destroy(ctx, o))
	require.ErrorIs(t, e.Destroy(ctx, o), lbrecon.ErrNotFound)
	_, err = e.Get(ctx, o)
	require.ErrorIs(t, err, lbrecon.ErrNotFound)
	require.Equal(t, map[lbrecon.Verb]int{lbrecon.VerbCreate: 1, lbrecon.VerbGet: 3, lbrecon.VerbList: 2, lbrecon.VerbDestroy: 2}, e.Calls())
	require.Equal(t, 8, e.TotalCalls())
	e.ResetCalls()
	require.Zero(t, e.TotalCalls())
}

func TestLatencyHonoursContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := lbrecontest.New(lbrecontest.Config{Latency: time.Hour})
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		_, err := e.List(ctx, lbrecon.Query{Tag: tag})
		require.ErrorIs(t, err, context.DeadlineExceeded)
	})
}

func TestFaults(t *testing.T) {
	ctx := context.Background()
	e := lbrecontest.New(lbrecontest.Config{Repair: true})
	only := func(name string) func(lbrecon.Object) bool {
		return func(o lbrecon.Object) bool { return o.Name == name }
	}

	e.FailCreate(only("x"), 1, nil)
	_, err := e.Create(ctx, backend("x"))
	require.ErrorIs(t, err, lbrecontest.ErrInjected)
	require.Empty(t, e.Objects())
	_, err = e.Create(ctx, backend("x"))
	require.NoError(t, err, "the fault was used up")

	e.CrashBeforeTag(nil, 1)
	_, err = e.Create(ctx, backend("y"))
	require.ErrorIs(t, err, lbrecontest.ErrCrashed)
	list, err := e.List(ctx, lbrecon.Query{Tag: tag, Scope: "lb"})
	require.NoError(t, err)
	require.Len(t, list, 2, "untagged objects in the scope are listed too")
	other, err := e.List(ctx, lbrecon.Query{Tag: tag, Scope: "lb-2"})
	require.NoError(t, err)
	require.Len(t, other, 1, "untagged objects of other scopes are not")
	var y lbrecon.Object
	for _, o := range list {
		if o.Name == "y" {
			y = o
		}
	}
	require.Empty(t, y.Tags)
	require.NoError(t, e.Tag(ctx, y, []string{tag}))
	got, err := e.Get(ctx, y)
	require.NoError(t, err)
	require.Equal(t, []string{tag}, got.Tags)

	e.TurnFailed(only("z"), 1)
	z, err := e.Create(ctx, backend("z"))
	require.NoError(t, err)
	z, err = e.Get(ctx, z)
	require.NoError(t, err)
	require.Equal(t, lbrecon.StateFailed, z.State)
	z, err = e.Repair(ctx, z)
	require.NoError(t, err)
	require.Equal(t, lbrecon.StateOK, z.State, "repaired (no pending period configured)")

	e.FailDestroy(nil, 2)
	require.ErrorIs(t, e.Destroy(ctx, z), lbrecontest.ErrInjected)
	require.ErrorIs(t, e.Destroy(ctx, z), lbrecontest.ErrInjected)
	require.NoError(t, e.Destroy(ctx, z))

	e.RateLimit(lbrecon.VerbGet, 1, 3*time.Second)
	_, err = e.Get(ctx, y)
	var rl interface{ RetryAfter() time.Duration }
	require.True(t, errors.As(err, &rl))
	require.Equal(t, 3*time.Second, rl.RetryAfter())
	_, err = e.Get(ctx, y)
	require.NoError(t, err)

	norepair := lbrecontest.New(lbrecontest.Config{})
	_, err = norepair.Repair(ctx, y)
	require.ErrorIs(t, err, lbrecon.ErrNotSupported)
}

func TestNothingTagged(t *testing.T) {
	ctx := context.Background()
	e := lbrecontest.New(lbrecontest.Config{NothingTagged: true})
	_, err := e.List(ctx, lbrecon.Query{Tag: tag})
	require.ErrorIs(t, err, lbrecon.ErrNotFound)
	e.Put(backend("b"))
	list, err := e.List(ctx, lbrecon.Query{Tag: tag})
	require.NoError(t, err)
	require.Len(t, list, 1)
}

func TestPutDeleteSetState(t *testing.T) {
	e := lbrecontest.New(lbrecontest.Config{})
	o := e.Put(backend("b"))
	require.Equal(t, lbrecon.StateOK, o.State)
	require.True(t, e.SetObjectState(o.Key(), lbrecon.StateFailed))
	require.Equal(t, lbrecon.StateFailed, e.Objects()[0].State)
	require.True(t, e.DeleteObject(o.Key()))
	require.False(t, e.DeleteObject(o.Key()))
	require.False(t, e.SetObjectState(o.Key(), lbrecon.StateOK))
	require.Zero(t, e.TotalCalls(), "test hooks are not calls")
}

// With identifiers unique per kind, a backend and a server share an ID: the
// hooks act on the one of the given kind.
func TestHooksKeyedByKindAndID(t *testing.T) {
	e := lbrecontest.New(lbrecontest.Config{IDsPerKind: true})
	b := e.Put(backend("b"))
	s := e.Put(server(b.ID, "s"))
	require.Equal(t, b.ID, s.ID, "the model gives both kinds their first ID")
	require.True(t, e.SetObjectState(s.Key(), lbrecon.StateFailed))
	require.Equal(t, lbrecon.StateOK, stateOf(e, b.Key()), "the backend is untouched")
	require.True(t, e.DeleteObject(s.Key()))
	require.Equal(t, lbrecon.StateOK, stateOf(e, b.Key()), "the backend is still there")
	require.Len(t, e.Objects(), 1)
}

func stateOf(e *lbrecontest.Engine, k lbrecon.Key) lbrecon.State {
	for _, o := range e.Objects() {
		if o.Key() == k {
			return o.State
		}
	}
	return 0
}
