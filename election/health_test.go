package election_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/reconkit/reconkit/election"
)

// expiringTerm is a live term with a fixed ValidUntil, for the health check
// alone.
type expiringTerm struct {
	ctx        context.Context
	validUntil time.Time
}

func (x expiringTerm) Context() context.Context     { return x.ctx }
func (x expiringTerm) Token() election.Token        { return 1 }
func (x expiringTerm) Identity() string             { return "a" }
func (x expiringTerm) Resign(context.Context) error { return nil }
func (x expiringTerm) ValidUntil() time.Time        { return x.validUntil }

// TestNewHealthCheck checks the backend-neutral constructor: healthy with
// no term, within ValidUntil plus the grace, and for a term without
// ValidUntil; unhealthy past it; a negative grace counts as zero.
func TestNewHealthCheck(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Unix(1000, 0))
	var cur election.Leadership
	current := func() election.Leadership { return cur }
	hc := election.NewHealthCheck(current, clk, time.Second)
	require.Equal(t, election.DefaultHealthCheckName, hc.Name())
	require.NoError(t, hc.Check(nil), "no term")

	cur = expiringTerm{ctx: context.Background(), validUntil: clk.Now()}
	clk.SetTime(clk.Now().Add(time.Second))
	require.NoError(t, hc.Check(nil), "exactly the grace past ValidUntil")
	clk.SetTime(clk.Now().Add(time.Nanosecond))
	require.ErrorIs(t, hc.Check(nil), election.ErrLeaderStale)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	cur = expiringTerm{ctx: ctx, validUntil: clk.Now().Add(-time.Hour)}
	require.NoError(t, hc.Check(nil), "an ended term is not leading")

	neg := election.NewHealthCheck(current, clk, -time.Second)
	cur = expiringTerm{ctx: context.Background(), validUntil: clk.Now()}
	require.NoError(t, neg.Check(nil), "at ValidUntil")
	clk.SetTime(clk.Now().Add(time.Nanosecond))
	require.ErrorIs(t, neg.Check(nil), election.ErrLeaderStale, "a negative grace counts as zero")

	real := election.NewHealthCheck(current, nil, 0)
	cur = expiringTerm{ctx: context.Background(), validUntil: time.Now().Add(time.Hour)}
	require.NoError(t, real.Check(nil), "a nil clock is the real clock")
	cur = expiringTerm{ctx: context.Background(), validUntil: time.Now().Add(-time.Hour)}
	require.ErrorIs(t, real.Check(nil), election.ErrLeaderStale, "a nil clock is the real clock")
}
