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

// The provider assigns a VIP into the object's status, not its spec: the
// creation's answer does not show it, Get and listings show it once the
// object is ok and VIPDelay passed; each load balancer gets its own;
// other kinds get none.
func TestAssignedVIP(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Unix(0, 0))
	e := lbrecontest.New(lbrecontest.ELB(lbrecontest.Config{Clock: clk, Pending: time.Second, VIPDelay: time.Second}))
	newLB := func(name string) lbrecon.Object {
		return lbrecon.Object{Kind: lbrecon.KindLoadBalancer, Name: name, Tags: []string{tag}, Spec: lbrecon.LoadBalancerSpec{Name: name}}
	}
	a, err := e.Create(t.Context(), newLB("a"))
	require.NoError(t, err)
	require.Nil(t, a.Status, "the answer shows no VIP")
	b, err := e.Create(t.Context(), newLB("b"))
	require.NoError(t, err)
	clk.Step(time.Second)
	got, err := e.Get(t.Context(), a)
	require.NoError(t, err)
	require.Equal(t, lbrecon.StateOK, got.State)
	require.Nil(t, got.Status, "ok, the VIP not assigned yet")
	clk.Step(time.Second)
	got, err = e.Get(t.Context(), a)
	require.NoError(t, err)
	require.Equal(t, lbrecon.LoadBalancerStatus{Address: netip.MustParseAddr("198.51.100.1"), Hostname: "a.lb.example"}, got.Status)
	require.Equal(t, a.Spec, got.Spec, "the spec is as requested")
	l, err := e.List(t.Context(), lbrecon.Query{Tag: tag})
	require.NoError(t, err)
	require.Len(t, l, 2)
	st, ok := lbrecon.StatusOfObject(l[1])
	require.True(t, ok)
	require.Equal(t, netip.MustParseAddr("198.51.100.2"), st.Address, b.ID)
	addr, ok := e.Reassign(a.Key())
	require.True(t, ok)
	require.Equal(t, netip.MustParseAddr("198.51.100.3"), addr)
	got, err = e.Get(t.Context(), a)
	require.NoError(t, err)
	require.Equal(t, lbrecon.LoadBalancerStatus{Address: addr, Hostname: "a.lb.example"}, got.Status)
}
