package fleetsim

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/reconkit/reconkit/lbrecon"
	"github.com/reconkit/reconkit/lbrecon/lbrecontest"
)

// fencedWorld is a world with just its fence, and the engine behind it, as
// Simulate builds them.
func fencedWorld() (*world, *passed) {
	w := &world{cfg: Config{}.withDefaults(), tl: &timeline{start: time.Now()}, failed: make(chan struct{}),
		abort: func() {}}
	w.engine = lbrecontest.New(w.cfg.Provider)
	w.fence = lbrecon.NewFence("the fleet's provider", 0, "start the simulation again")
	return w, &passed{w: w, e: w.engine}
}

// through sends one create through the world's fence, as lbrecon.Guard
// does: the fence's check, then the engine behind it.
func through(w *world, p *passed, ctx context.Context) error {
	obj := lbrecon.Object{Kind: lbrecon.KindBackend, Name: "b"}
	if err := w.check(ctx, lbrecon.VerbCreate, obj); err != nil {
		return err
	}
	_, err := p.Create(ctx, obj)
	return err
}

func agentCtx(agent string, token uint64) context.Context {
	return lbrecon.WithToken(context.WithValue(context.Background(), agentKey{}, agent), token)
}

// Two terms overlap (the nemesis deleted the Lease): A's write passes the
// fence with token 5, then B's with token 6, and B's reaches the provider
// first. The fence admitted them in order, so no FenceOrder violation.
func TestFenceOrderAdmittedInOrderArrivesOutOfOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w, p := fencedWorld()
		obj := lbrecon.Object{Kind: lbrecon.KindBackend, Name: "b"}
		a, b := agentCtx("a", 5), agentCtx("b", 6)
		if err := w.check(a, lbrecon.VerbCreate, obj); err != nil {
			t.Fatalf("the fence refuses A's token 5: %v", err)
		}
		w.terms.leaseDeleted() // A's term is handed over: B's term overlaps it
		if err := w.check(b, lbrecon.VerbCreate, obj); err != nil {
			t.Fatalf("the fence refuses B's token 6: %v", err)
		}
		if _, err := p.Create(b, obj); err != nil {
			t.Fatal(err)
		}
		if _, err := p.Create(a, obj); err != nil {
			t.Fatal(err)
		}
		if len(w.violations) != 0 {
			t.Fatalf("violations %v, want none: the fence admitted token 5 before 6", w.violations)
		}
	})
}

// A fence that lets a lower token through after a higher one (here reset
// under a live term) is still caught.
func TestFenceOrderLowerAdmittedAfterHigher(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		w, p := fencedWorld()
		if err := through(w, p, agentCtx("b", 6)); err != nil {
			t.Fatal(err)
		}
		w.fence.Reset(0)
		if err := through(w, p, agentCtx("a", 5)); err != nil {
			t.Fatal(err)
		}
		if len(w.violations) != 1 || w.violations[0].Invariant != FenceOrder || w.violations[0].Agent != "a" {
			t.Fatalf("violations %v, want one %s by a", w.violations, FenceOrder)
		}
	})
}
