package lbrecon_test

import (
	"context"
	"testing"

	"github.com/reconkit/reconkit/lbrecon"
	"github.com/reconkit/reconkit/lbrecon/lbrecontest"
)

// converged returns an instant engine holding a converged 4x2x50 load
// balancer, and its reconciler.
func converged(b *testing.B) (*lbrecontest.Engine, *lbrecon.LoadBalancerReconciler, lbrecon.LoadBalancer) {
	b.Helper()
	eng := lbrecontest.New(lbrecontest.Config{})
	lb := desc(4, 2, 50)
	r, err := lbrecon.NewLoadBalancer(lbrecon.Config{Engine: eng, Tag: owner, Journal: lbrecon.NoJournal}, lb)
	if err != nil {
		b.Fatal(err)
	}
	if err := r.Reconcile(context.Background()); err != nil {
		b.Fatal(err)
	}
	return eng, r, lb
}

// BenchmarkPlanSteps runs the four load-balancer steps over the 216 objects
// of a converged 4x2x50 load balancer: the planning cost of one pass.
func BenchmarkPlanSteps(b *testing.B) {
	eng, _, lb := converged(b)
	obs := lbrecon.NewObservation(eng.Objects())
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		for _, st := range lb.Steps() {
			if _, err := st.Plan(ctx, obs); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// BenchmarkCheckConverged is Check on a converged 4x2x50 load balancer with
// an instant engine: listing copies, ownership filtering and planning.
func BenchmarkCheckConverged(b *testing.B) {
	_, r, _ := converged(b)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		p, err := r.Check(ctx)
		if err != nil || !p.Empty() {
			b.Fatal(err, p)
		}
	}
}

// BenchmarkCheckFromEmpty plans the first wave for an empty provider.
func BenchmarkCheckFromEmpty(b *testing.B) {
	eng := lbrecontest.New(lbrecontest.Config{})
	r, err := lbrecon.NewLoadBalancer(lbrecon.Config{Engine: eng, Tag: owner, Journal: lbrecon.NoJournal}, desc(4, 2, 50))
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := r.Check(ctx); err != nil {
			b.Fatal(err)
		}
	}
}
