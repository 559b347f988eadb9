package lbrecontest_test

import (
	"context"
	"net/netip"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/reconkit/reconkit/lbrecon"
	"github.com/reconkit/reconkit/lbrecon/lbrecontest"
)

// WaitFor wakes on the engine's clock when a pending period or a deletion
// ends, and on every change made through the API or a test hook; it never
// returns before the condition holds, and reports what it saw when the
// context ends.
func TestWaitFor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		clk := clocktesting.NewFakeClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
		e := lbrecontest.New(lbrecontest.Config{Clock: clk, Pending: time.Second, DeleteDelay: 2 * time.Second})
		b, err := e.Create(ctx, backend("b"))
		require.NoError(t, err)
		done := make(chan error, 1)
		wait := func(cond func([]lbrecon.Object) bool) {
			go func() { done <- e.WaitFor(ctx, cond) }()
			synctest.Wait()
			require.Empty(t, done, "returned before the condition held")
		}

		wait(func(objs []lbrecon.Object) bool { return objs[0].State == lbrecon.StateOK })
		clk.Step(time.Second) // the pending period ends
		require.NoError(t, <-done)

		wait(func(objs []lbrecon.Object) bool { return objs[0].State == lbrecon.StateFailed })
		require.True(t, e.SetObjectState(b.Key(), lbrecon.StateFailed))
		require.NoError(t, <-done)

		wait(func(objs []lbrecon.Object) bool { return len(objs) == 2 })
		_, err = e.Create(ctx, backend("c"))
		require.NoError(t, err)
		require.NoError(t, <-done)

		require.NoError(t, e.Destroy(ctx, b))
		wait(func(objs []lbrecon.Object) bool { return len(objs) == 1 })
		clk.Step(2 * time.Second) // the deletion completes
		require.NoError(t, <-done)

		short, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		err = e.WaitFor(short, func([]lbrecon.Object) bool { return false })
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.ErrorContains(t, err, "condition not met")
		require.ErrorContains(t, err, "backend/c", "the error says what was seen")
	})
}

// WaitConverged returns once a host's reconciler, running on its own, has
// built the load balancer, and again once it has torn it down.
func TestWaitConverged(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		e := lbrecontest.New(lbrecontest.Config{Latency: 20 * time.Millisecond, Pending: time.Second,
			ListLag: 3 * time.Second, DeleteDelay: 2 * time.Second, Integrity: true})
		lb := lbrecon.LoadBalancer{ID: "lb-1", Suffix: "svc-1",
			Ports:     []lbrecon.Port{{Name: "http", NodePort: 30080, ExternalPort: 80}, {Name: "https", NodePort: 30443, ExternalPort: 443}},
			Addresses: []netip.Addr{netip.MustParseAddr("192.0.2.1")},
			Targets:   []lbrecon.Target{{Name: "a", Address: netip.MustParseAddr("10.0.0.1")}, {Name: "b", Address: netip.MustParseAddr("10.0.0.2")}}}
		r, err := lbrecon.NewLoadBalancer(lbrecon.Config{Engine: e, Tag: tag, Journal: lbrecon.NoJournal}, lb)
		require.NoError(t, err)
		require.False(t, lbrecontest.Converged(lb, tag)(e.Objects()))

		host := make(chan error, 1)
		go func() { host <- r.Reconcile(ctx) }()
		wctx, cancel := context.WithTimeout(ctx, time.Hour)
		defer cancel()
		require.NoError(t, e.WaitConverged(wctx, lb, tag))
		for _, o := range e.Objects() { // time stands still until this goroutine blocks
			require.Equal(t, lbrecon.StateOK, o.State, "converged with %v not ok", o)
		}
		require.NoError(t, <-host)

		other := lb
		other.Ports = []lbrecon.Port{{Name: "http", NodePort: 30081, ExternalPort: 80}, lb.Ports[1]}
		require.False(t, lbrecontest.Converged(other, tag)(e.Objects()), "a server's port differs")
		require.False(t, lbrecontest.Converged(lb, "owner=other")(e.Objects()), "another owner's view")

		go func() { host <- r.Teardown(ctx) }()
		gone := lb
		gone.Ports = nil
		require.NoError(t, e.WaitConverged(wctx, gone, tag))
		require.Empty(t, e.Objects(), "converged to nothing only once the deletions completed")
		require.NoError(t, <-host)
	})
}

// UniqueBinds refuses a second listener on one address and port, on
// create and on update, until the first one's deletion completes.
func TestUniqueBinds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := t.Context()
		clk := clocktesting.NewFakeClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
		e := lbrecontest.New(lbrecontest.Config{Clock: clk, UniqueBinds: true, DeleteDelay: time.Second})
		f := e.Put(lbrecon.Object{Kind: lbrecon.KindFrontend, Name: "f", Tags: []string{tag}, Spec: lbrecon.FrontendSpec{LoadBalancer: "lb"}})
		addr := netip.MustParseAddr("192.0.2.1")
		bind := func(name string, port uint16) lbrecon.Object {
			return lbrecon.Object{Kind: lbrecon.KindBind, Name: name, Tags: []string{tag},
				Spec: lbrecon.BindSpec{Frontend: f.ID, Address: addr, Port: port}}
		}
		b80, err := e.Create(ctx, bind("a", 80))
		require.NoError(t, err)
		_, err = e.Create(ctx, bind("b", 80))
		require.ErrorIs(t, err, lbrecon.ErrConflict, "a second listener on 192.0.2.1:80")
		b443, err := e.Create(ctx, bind("b", 443))
		require.NoError(t, err)
		_, err = e.Update(ctx, b443, bind("b", 80))
		require.ErrorIs(t, err, lbrecon.ErrConflict, "moved onto a taken port")
		_, err = e.Update(ctx, b80, bind("a", 80))
		require.NoError(t, err, "a bind does not conflict with itself")

		require.NoError(t, e.Destroy(ctx, b80))
		_, err = e.Update(ctx, b443, bind("b", 80))
		require.ErrorIs(t, err, lbrecon.ErrConflict, "held while being deleted")
		clk.Step(time.Second)
		_, err = e.Update(ctx, b443, bind("b", 80))
		require.NoError(t, err)

		f2 := e.Put(lbrecon.Object{Kind: lbrecon.KindFrontend, Name: "f2", Tags: []string{tag}, Spec: lbrecon.FrontendSpec{LoadBalancer: "lb-2"}})
		onOther := bind("c", 80)
		onOther.Spec = lbrecon.BindSpec{Frontend: f2.ID, Address: addr, Port: 80}
		_, err = e.Create(ctx, onOther)
		require.NoError(t, err, "another load balancer's listener")

		plain := lbrecontest.New(lbrecontest.Config{})
		f = plain.Put(f)
		_, err = plain.Create(ctx, bind("a", 80))
		require.NoError(t, err)
		_, err = plain.Create(ctx, bind("b", 80))
		require.NoError(t, err, "without the knob, duplicates are accepted")
	})
}
