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

// A token bucket: Burst calls at once, then one per 1/Rate, each refused
// call a 429 whose hint is the time to the next token, changing nothing.
func TestTokenBucket(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	e := lbrecontest.New(lbrecontest.Config{Clock: clk, Rate: 2, Burst: 3})
	for range 3 {
		_, err := e.Create(t.Context(), backend("b"))
		require.NoError(t, err)
	}
	_, err := e.Create(t.Context(), backend("c"))
	var rl *lbrecontest.RateLimitError
	require.ErrorAs(t, err, &rl)
	require.Equal(t, 500*time.Millisecond, rl.RetryAfter())
	require.Len(t, e.Objects(), 3, "a throttled call changes nothing")
	clk.Step(250 * time.Millisecond)
	_, err = e.List(t.Context(), lbrecon.Query{Tag: tag})
	require.ErrorAs(t, err, &rl)
	require.Equal(t, 250*time.Millisecond, rl.RetryAfter(), "the hint is the time to the next token")
	clk.Step(250 * time.Millisecond)
	_, err = e.List(t.Context(), lbrecon.Query{Tag: tag})
	require.NoError(t, err)
	require.Equal(t, 2, e.Throttled())
	require.Equal(t, 6, e.TotalCalls(), "refused calls count")
}

// The fence admits equal and higher tokens and refuses, for good, a
// lower one and a write without a token, when the write takes effect.
func TestFence(t *testing.T) {
	e := lbrecontest.New(lbrecontest.Config{Fence: true})
	ctx := func(tok uint64) context.Context { return lbrecon.WithToken(t.Context(), tok) }
	_, err := e.Create(t.Context(), backend("none"))
	require.ErrorIs(t, err, lbrecon.ErrNoToken)
	require.True(t, backoff.IsPermanent(err))
	o, err := e.Create(ctx(5), backend("b"))
	require.NoError(t, err)
	_, err = e.Create(ctx(5), backend("c"))
	require.NoError(t, err, "an equal token writes")
	err = e.Destroy(ctx(4), o)
	require.ErrorIs(t, err, lbrecon.ErrFenced)
	var fe *lbrecon.FenceError
	require.True(t, errors.As(err, &fe))
	require.Equal(t, uint64(5), fe.Stored)
	require.Equal(t, uint64(4), fe.Token)
	require.True(t, backoff.IsPermanent(err))
	require.Len(t, e.Objects(), 2, "a fenced write changes nothing")
	_, err = e.List(t.Context(), lbrecon.Query{Tag: tag})
	require.NoError(t, err, "reads are not fenced")
	require.NoError(t, e.Destroy(ctx(6), o))
	require.Equal(t, uint64(6), e.FenceToken())
	require.Equal(t, 1, e.Fenced())
	e.ResetFence(1)
	require.NoError(t, e.Tag(ctx(2), lbrecon.Object{Kind: lbrecon.KindBackend, ID: e.Objects()[0].ID}, []string{"x=y"}))
}

// lbSpec is a user's load-balancer object, whose VIP the provider assigns.
type lbSpec struct {
	Name string
	VIP  netip.Addr
}

// The provider assigns a VIP at creation: the answer, Get and listings
// show it; each load balancer gets its own; other specs are untouched.
func TestAssignedVIP(t *testing.T) {
	e := lbrecontest.New(lbrecontest.Config{AssignVIP: func(spec any, vip netip.Addr) (any, bool) {
		s, ok := spec.(lbSpec)
		s.VIP = vip
		return s, ok
	}})
	newLB := func(name string) lbrecon.Object {
		return lbrecon.Object{Kind: "loadbalancer", Name: name, Tags: []string{tag}, Spec: lbSpec{Name: name}}
	}
	a, err := e.Create(t.Context(), newLB("a"))
	require.NoError(t, err)
	require.Equal(t, netip.MustParseAddr("198.51.100.1"), a.Spec.(lbSpec).VIP)
	b, err := e.Create(t.Context(), newLB("b"))
	require.NoError(t, err)
	require.Equal(t, netip.MustParseAddr("198.51.100.2"), b.Spec.(lbSpec).VIP)
	got, err := e.Get(t.Context(), a)
	require.NoError(t, err)
	require.Equal(t, a.Spec, got.Spec)
	l, err := e.List(t.Context(), lbrecon.Query{Tag: tag})
	require.NoError(t, err)
	require.Len(t, l, 2)
	require.Equal(t, a.Spec, l[0].Spec)
	be, err := e.Create(t.Context(), backend("x"))
	require.NoError(t, err)
	require.Equal(t, backend("x").Spec, be.Spec, "no VIP for other kinds")
}
