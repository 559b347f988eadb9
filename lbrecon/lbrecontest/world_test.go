package lbrecontest_test

import (
	"context"
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/reconkit/reconkit/backoff"
	"github.com/reconkit/reconkit/lbrecon"
	"github.com/reconkit/reconkit/lbrecon/lbrecontest"
)

func server(backendID, name string) lbrecon.Object {
	return lbrecon.Object{Kind: lbrecon.KindServer, Name: name, Tags: []string{tag},
		Spec: lbrecon.ServerSpec{Backend: backendID, Address: netip.MustParseAddr("10.0.0.1"), Port: 1}}
}

func names(objs []lbrecon.Object) []string {
	out := []string{}
	for _, o := range objs {
		out = append(out, o.Name)
	}
	return out
}

func TestListLag(t *testing.T) {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	e := lbrecontest.New(lbrecontest.Config{Clock: clk, ListLag: 3 * time.Second})
	b, err := e.Create(ctx, backend("b"))
	require.NoError(t, err)
	got, err := e.Get(ctx, b)
	require.NoError(t, err, "Get sees the write at once")
	require.Equal(t, b.ID, got.ID)
	list := func() []string {
		l, err := e.List(ctx, lbrecon.Query{Tag: tag, Scope: "lb"})
		require.NoError(t, err)
		return names(l)
	}
	require.Empty(t, list(), "a new object is not listed before the lag")
	clk.Step(3 * time.Second)
	require.Equal(t, []string{"b"}, list())

	// An update is listed late too.
	up := backend("b")
	up.Spec = lbrecon.BackendSpec{LoadBalancer: "lb-x"}
	_, err = e.Update(ctx, b, up)
	require.NoError(t, err)
	l, err := e.List(ctx, lbrecon.Query{Tag: tag})
	require.NoError(t, err)
	require.Equal(t, lbrecon.BackendSpec{LoadBalancer: "lb"}, l[0].Spec, "the old spec is listed during the lag")
	clk.Step(3 * time.Second)
	l, err = e.List(ctx, lbrecon.Query{Tag: tag})
	require.NoError(t, err)
	require.Equal(t, lbrecon.BackendSpec{LoadBalancer: "lb-x"}, l[0].Spec)

	// A destroyed object is still listed during the lag.
	require.NoError(t, e.Destroy(ctx, b))
	l, err = e.List(ctx, lbrecon.Query{Tag: tag})
	require.NoError(t, err)
	require.Len(t, l, 1)
	clk.Step(3 * time.Second)
	l, err = e.List(ctx, lbrecon.Query{Tag: tag})
	require.NoError(t, err)
	require.Empty(t, l)
}

func TestAsynchronousDeletion(t *testing.T) {
	ctx := context.Background()
	clk := clocktesting.NewFakeClock(time.Unix(1000, 0))
	e := lbrecontest.New(lbrecontest.Config{Clock: clk, DeleteDelay: 2 * time.Second, ListLag: time.Second, UniqueNames: true})
	b := e.Put(backend("b"))
	require.NoError(t, e.Destroy(ctx, b))
	_, err := e.Get(ctx, b)
	require.NoError(t, err, "still exists while being deleted")
	_, err = e.Create(ctx, backend("b"))
	require.ErrorIs(t, err, lbrecon.ErrAlreadyExists, "its name stays taken")
	require.NoError(t, e.Destroy(ctx, b), "destroying it again is accepted")
	clk.Step(2 * time.Second)
	_, err = e.Get(ctx, b)
	require.ErrorIs(t, err, lbrecon.ErrNotFound)
	l, err := e.List(ctx, lbrecon.Query{Tag: tag})
	require.NoError(t, err)
	require.Len(t, l, 1, "listed for ListLag after the deletion completed")
	clk.Step(time.Second)
	l, err = e.List(ctx, lbrecon.Query{Tag: tag})
	require.NoError(t, err)
	require.Empty(t, l)
}

func TestIntegrityAndLow(t *testing.T) {
	ctx := context.Background()
	e := lbrecontest.New(lbrecontest.Config{Integrity: true})
	_, err := e.Create(ctx, server("id-404", "s"))
	require.ErrorIs(t, err, lbrecon.ErrConflict, "no child under a missing parent")
	b, err := e.Create(ctx, backend("b"))
	require.NoError(t, err)
	s1, err := e.Create(ctx, server(b.ID, "s1"))
	require.NoError(t, err)
	_, err = e.Create(ctx, server(b.ID, "s2"))
	require.NoError(t, err)
	require.ErrorIs(t, e.Destroy(ctx, b), lbrecon.ErrConflict, "ResourceInUse")
	e.ResetLow()
	require.NoError(t, e.Destroy(ctx, s1))
	_, err = e.Create(ctx, server(b.ID, "s3"))
	require.NoError(t, err)
	require.Equal(t, map[string]int{b.ID: 1}, e.Low(lbrecon.KindServer), "the fewest servers the backend held")
}

func TestNamesScopeDefaultsAndCost(t *testing.T) {
	ctx := context.Background()
	e := lbrecontest.New(lbrecontest.Config{UniqueNames: true, MaxNameLen: 5, Default: func(spec any) any {
		if s, ok := spec.(lbrecon.ServerSpec); ok && s.Weight == 0 {
			s.Weight = 1
			return s
		}
		return spec
	}})
	_, err := e.Create(ctx, backend("toolong"))
	require.True(t, backoff.IsPermanent(err), "a name too long is a permanent error: %v", err)
	b, err := e.Create(ctx, backend("b"))
	require.NoError(t, err)
	_, err = e.Create(ctx, backend("b"))
	require.ErrorIs(t, err, lbrecon.ErrAlreadyExists)
	s, err := e.Create(ctx, server(b.ID, "s"))
	require.NoError(t, err)
	require.Equal(t, uint16(1), s.Spec.(lbrecon.ServerSpec).Weight, "defaulted by the provider")

	// Untagged objects are listed within their scope only.
	e.Put(lbrecon.Object{Kind: lbrecon.KindServer, Name: "u", Spec: lbrecon.ServerSpec{Backend: b.ID}})
	e.Put(lbrecon.Object{Kind: lbrecon.KindBackend, Name: "o", Spec: lbrecon.BackendSpec{LoadBalancer: "other"}})
	e.ResetCalls()
	l, err := e.List(ctx, lbrecon.Query{Tag: tag, Scope: "lb"})
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"b", "s", "u"}, names(l))
	require.Equal(t, 1+3, e.Requests(), "a List costs 1 + N requests")
	require.Equal(t, 1, e.TotalCalls())
}

func TestLostAnswersThrottlingAndTagFailures(t *testing.T) {
	ctx := context.Background()
	e := lbrecontest.New(lbrecontest.Config{})
	e.FailCreateAfter(nil, 1)
	_, err := e.Create(ctx, backend("b"))
	require.ErrorIs(t, err, lbrecontest.ErrInjected)
	require.Len(t, e.Objects(), 1, "created although the call failed")

	e.FailTag(nil, 1)
	require.ErrorIs(t, e.Tag(ctx, e.Objects()[0], []string{"x=y"}), lbrecontest.ErrInjected)

	e.RateLimitEvery(3, 0)
	var limited int
	for range 9 {
		_, err := e.List(ctx, lbrecon.Query{Tag: tag})
		var rl *lbrecontest.RateLimitError
		if errors.As(err, &rl) {
			limited++
			require.Zero(t, rl.RetryAfter(), "a 429 without a hint")
		}
	}
	require.Equal(t, 3, limited)
}
