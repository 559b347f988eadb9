package lbrecontest_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reconkit/reconkit/lbrecon"
	"github.com/reconkit/reconkit/lbrecon/lbrecontest"
)

// On the ELB model a pool needs its load balancer, a load balancer with
// a pool cannot be destroyed through the API, and DeleteTree removes it
// with everything under it, and nothing else.
func TestLoadBalancerObjects(t *testing.T) {
	e := lbrecontest.New(lbrecontest.ELB(lbrecontest.Config{}))
	ctx := t.Context()
	pool := func(lbID string) lbrecon.Object {
		return lbrecon.Object{Kind: lbrecon.KindBackend, Name: "p", Tags: []string{tag}, Spec: lbrecon.BackendSpec{LoadBalancer: lbID}}
	}
	_, err := e.Create(ctx, pool("missing"))
	require.ErrorIs(t, err, lbrecon.ErrConflict, "a pool under a missing load balancer")
	newLB := func(name string) lbrecon.Object {
		o, err := e.Create(ctx, lbrecon.Object{Kind: lbrecon.KindLoadBalancer, Name: name, Tags: []string{tag}, Spec: lbrecon.LoadBalancerSpec{Name: name}})
		require.NoError(t, err)
		return o
	}
	a, b := newLB("a"), newLB("b")
	p, err := e.Create(ctx, pool(a.ID))
	require.NoError(t, err)
	_, err = e.Create(ctx, lbrecon.Object{Kind: lbrecon.KindListener, Name: "l", Tags: []string{tag},
		Spec: lbrecon.ListenerSpec{LoadBalancer: a.ID, DefaultBackend: p.ID, Port: 80}})
	require.NoError(t, err)
	_, err = e.Create(ctx, lbrecon.Object{Kind: lbrecon.KindHealthCheck, Name: "h", Tags: []string{tag},
		Spec: lbrecon.HealthCheckSpec{Backend: p.ID, Port: 32000, Path: "/healthz"}})
	require.NoError(t, err)
	require.ErrorIs(t, e.Destroy(ctx, a), lbrecon.ErrConflict, "in use")
	require.Equal(t, 4, e.DeleteTree(a.Key()))
	objs := e.Objects()
	require.Len(t, objs, 1)
	require.Equal(t, b.Key(), objs[0].Key())
}
