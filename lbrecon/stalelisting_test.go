package lbrecon_test

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconkit/reconkit/lbrecon"
	"github.com/reconkit/reconkit/lbrecon/lbrecontest"
)

// Check and Observe may run at any time, beside a pass: a listing that
// started before one already merged must change nothing of the memory,
// whenever it returns.

// heldKey marks the context of the call whose listing heldList holds.
type heldKey struct{}

// heldList lists, for a call whose context carries heldKey, at once (its
// listing is as of the call's start) and returns it only once released;
// every other call goes through.
type heldList struct {
	*lbrecontest.Engine
	entered chan struct{} // closed once the held listing is taken
	release chan struct{} // close to return it
}

func newHeldList(eng *lbrecontest.Engine) *heldList {
	return &heldList{Engine: eng, entered: make(chan struct{}), release: make(chan struct{})}
}

func (h *heldList) List(ctx context.Context, q lbrecon.Query) ([]lbrecon.Object, error) {
	if ctx.Value(heldKey{}) == nil {
		return h.Engine.List(ctx, q)
	}
	objs, err := h.Engine.List(ctx, q)
	close(h.entered)
	<-h.release // not ctx: the answer comes late, whatever the caller's deadline
	return objs, err
}

// heldCheck starts a Check whose listing is taken now and returned once
// h is released; the returned channel gives its error.
func heldCheck(t *testing.T, r *lbrecon.LoadBalancerReconciler, h *heldList) <-chan error {
	t.Helper()
	return held(t, h, func(ctx context.Context) error {
		_, err := r.Check(ctx)
		return err
	})
}

// held starts call with a context whose listing h holds, once the
// listing is taken; the returned channel gives its error.
func held(t *testing.T, h *heldList, call func(context.Context) error) <-chan error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- call(context.WithValue(t.Context(), heldKey{}, true)) }()
	<-h.entered
	return done
}

// A Check that listed before the load balancer was created and returns
// after a Reconcile converged does not take its address away.
func TestStaleCheckKeepsAssigned(t *testing.T) {
	for _, s := range shapes {
		t.Run(s.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				eng := lbrecontest.New(s.model(lbrecontest.Config{}))
				h := newHeldList(eng)
				lb := s.provisioned(2, 2)
				r := newLB(t, h, lb, nil)
				checked := heldCheck(t, r, h)

				require.NoError(t, r.Reconcile(t.Context()))
				want, wantID, ok := r.Assigned()
				require.True(t, ok, "assigned after a converged Reconcile")
				require.Equal(t, lbObject(t, eng).ID, wantID)

				close(h.release)
				require.NoError(t, <-checked)
				st, id, ok := r.Assigned()
				require.True(t, ok, "a stale Check took the assigned address away: %+v", st)
				require.Equal(t, want, st)
				require.Equal(t, wantID, id)

				// The memory did not go back either: a fresh listing
				// confirms the state, and the address stays.
				requireConverged(t, eng, r, lb)
				st, _, ok = r.Assigned()
				require.True(t, ok)
				require.Equal(t, want, st)
			})
		})
	}
}

// A Check that listed before a Teardown and returns after it does not
// bring the torn-down load balancer's address back.
func TestStaleCheckAfterTeardown(t *testing.T) {
	for _, s := range shapes {
		t.Run(s.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				eng := lbrecontest.New(s.model(lbrecontest.Config{}))
				h := newHeldList(eng)
				lb := s.provisioned(2, 2)
				r := newLB(t, h, lb, nil)
				require.NoError(t, r.Reconcile(t.Context()))
				_, _, ok := r.Assigned()
				require.True(t, ok)

				checked := heldCheck(t, r, h)
				require.NoError(t, r.Teardown(t.Context()))
				require.Empty(t, eng.Objects())
				st, _, ok := r.Assigned()
				require.False(t, ok, "assigned after a teardown: %+v", st)
				// A listing after the teardown confirms the destructions:
				// the memory forgets them.
				p, err := r.Check(t.Context())
				require.NoError(t, err)
				require.Empty(t, p.Unconfirmed, "%+v", p)

				close(h.release)
				require.NoError(t, <-checked)
				st, id, ok := r.Assigned()
				require.False(t, ok, "a stale Check brought a torn-down address back: %+v", st)
				require.Empty(t, id)
			})
		})
	}
}

// A stale listing (Check's or Observe's) that does not show a pending
// object does not restart its pending clock: PendingTimeout still counts
// from when a listing first showed it pending.
func TestStaleCheckKeepsPendingClock(t *testing.T) {
	for _, c := range []struct {
		name string
		call func(*lbrecon.LoadBalancerReconciler) func(context.Context) error
	}{
		{"check", func(r *lbrecon.LoadBalancerReconciler) func(context.Context) error {
			return func(ctx context.Context) error { _, err := r.Check(ctx); return err }
		}},
		{"observe", func(r *lbrecon.LoadBalancerReconciler) func(context.Context) error {
			return func(ctx context.Context) error { _, err := r.Observe(ctx); return err }
		}},
	} {
		t.Run(c.name, func(t *testing.T) { stalePendingClock(t, c.call) })
	}
}

func stalePendingClock(t *testing.T, call func(*lbrecon.LoadBalancerReconciler) func(context.Context) error) {
	synctest.Test(t, func(t *testing.T) {
		eng := lbrecontest.New(lbrecontest.ELB(lbrecontest.Config{Pending: time.Hour}))
		h := newHeldList(eng)
		lb := shapes[0].provisioned(1, 1)
		r := newLB(t, h, lb, func(c *lbrecon.Config) { c.PendingTimeout = 10 * time.Minute })
		checked := held(t, h, call(r))

		// Six minutes of the load balancer pending, its creation confirmed.
		ctx, cancel := context.WithTimeout(t.Context(), 6*time.Minute)
		err := r.Reconcile(ctx)
		cancel()
		require.ErrorIs(t, err, context.DeadlineExceeded)
		require.NotErrorIs(t, err, lbrecon.ErrPendingTimeout)
		p, err := r.Check(t.Context())
		require.NoError(t, err)
		require.Len(t, p.Pending, 1, "%+v", p)
		require.Empty(t, p.Unconfirmed, "%+v", p)

		close(h.release)
		require.NoError(t, <-checked)

		// Four minutes more reach the PendingTimeout counted from the
		// first listing that showed it, not from the stale one.
		ctx, cancel = context.WithTimeout(t.Context(), 6*time.Minute)
		defer cancel()
		err = r.Reconcile(ctx)
		require.ErrorIs(t, err, lbrecon.ErrPendingTimeout, "the stale listing restarted the pending clock")
		require.False(t, errors.Is(err, context.DeadlineExceeded), "%v", err)
	})
}

// An Observe whose listing started before one already merged says so:
// Stale is true of its observation, and false of a fresh one.
func TestStaleObservationSaysSo(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		eng := lbrecontest.New(lbrecontest.ELB(lbrecontest.Config{}))
		h := newHeldList(eng)
		lb := shapes[0].provisioned(1, 1)
		r := newLB(t, h, lb, nil)
		var stale *lbrecon.Observation
		observed := held(t, h, func(ctx context.Context) error {
			var err error
			stale, err = r.Observe(ctx)
			return err
		})
		require.NoError(t, r.Reconcile(t.Context()))
		close(h.release)
		require.NoError(t, <-observed)
		require.True(t, stale.Stale(), "an observation from a listing older than the pass's")
		fresh, err := r.Observe(t.Context())
		require.NoError(t, err)
		require.False(t, fresh.Stale())
		require.False(t, lbrecon.NewObservation(nil).Stale())
	})
}
