package lbrecon

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
)

// Moving is a [LoadBalancerReconciler] whose load balancer may change its
// ID: [Moving.SetLoadBalancer] takes a description with another ID, and
// the next calls build the new load balancer first, then tear down what
// the owner (cfg.Tag) has on every other ID, so traffic moves before the
// old load balancer goes (make-before-break, as for servers).
//
// The old ID's reconciler, with its memory of unconfirmed writes and
// creations of unknown outcome, tears its own objects down first; then,
// once per ID, a [Leftovers] pass finds by the tag the load balancers a
// previous process left (a restart during a move). Only objects carrying
// the tag are destroyed, children before parents; objects of other
// owners and untagged objects on the old load balancer are never touched.
// A torn-down ID's reconciler is kept for the list lag, since a replica
// may show what it destroyed: a move back to that ID takes it back, and
// the sweep waits until the lag has passed.
//
// A provider that refuses one external address on two load balancers at
// once cannot converge the new one while the old one holds the address:
// such a host tears the old one down first ([TeardownExcept] with the new
// ID) and accepts the gap. Every ID's reconciler shares cfg.Journal:
// entries are kept per scope (the load balancer's ID), so the old and new
// reconcilers never replace or remove each other's.
type Moving struct {
	cfg Config

	mu    sync.Mutex
	cur   *LoadBalancerReconciler
	old   []*LoadBalancerReconciler // reconcilers of previous IDs, not yet torn down
	sweep *Leftovers                // the leftovers of every ID but cur's
	swept bool                      // sweep converged since cur's ID was set
	// past holds the reconcilers of previous IDs torn down less than the
	// list lag ago: a replica may still show what they destroyed, and
	// their memory of it is kept (a move back takes it back), and the
	// sweep, which has none, waits until settled.
	past    []*LoadBalancerReconciler
	settled time.Time
}

// ErrPreviousNotTornDown is wrapped by [Moving.Reconcile]'s and
// [Moving.ReconcileOnce]'s error when the current load balancer converged
// and tearing down an earlier ID (or the leftovers of one) failed: the
// host may publish the current load balancer's address, and the next
// calls carry on with the teardown.
var ErrPreviousNotTornDown = errors.New("lbrecon: the current load balancer converged; an earlier one is not torn down")

// NewMoving validates cfg and lb and returns a Moving for them; cfg is
// used as for [NewLoadBalancer] by the reconciler of every ID, which
// share its Journal.
func NewMoving(cfg Config, lb LoadBalancer) (*Moving, error) {
	r, err := NewLoadBalancer(cfg, lb)
	if err != nil {
		return nil, err
	}
	return &Moving{cfg: cfg, cur: r}, nil
}

// Current returns the reconciler of the current ID, for Check, Status,
// Observe and Teardown.
func (m *Moving) Current() *LoadBalancerReconciler {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.cur
}

// SetLoadBalancer replaces the desired description. With the current ID
// it is [LoadBalancerReconciler.SetLoadBalancer]; with another, the next
// calls build lb on a new reconciler, then tear the other IDs down. A
// description with an ID set before, not yet torn down, gets that ID's
// reconciler back, with its memory.
func (m *Moving) SetLoadBalancer(lb LoadBalancer) error {
	if err := lb.Validate(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if lb.ID == m.cur.current().ID {
		return m.cur.SetLoadBalancer(lb)
	}
	var r *LoadBalancerReconciler
	for _, list := range []*[]*LoadBalancerReconciler{&m.old, &m.past} {
		if i := slices.IndexFunc(*list, func(o *LoadBalancerReconciler) bool { return o.current().ID == lb.ID }); i >= 0 && r == nil {
			r = (*list)[i]
			*list = slices.Delete(*list, i, i+1)
		}
	}
	if r != nil {
		if err := r.SetLoadBalancer(lb); err != nil {
			return err
		}
	} else {
		var err error
		if r, err = NewLoadBalancer(m.cfg, lb); err != nil {
			return err
		}
	}
	if m.sweep != nil && !m.swept {
		// The sweep may have destroyed objects a replica still shows; the
		// next one, without its memory, waits the lag.
		if at := m.cur.horizonAfter(m.cur.clock.Now()).at; at.After(m.settled) {
			m.settled = at
		}
	}
	m.old = append(m.old, m.cur)
	m.cur, m.sweep, m.swept = r, nil, false
	return nil
}

// Reconcile converges the current load balancer (see
// [Reconciler.Reconcile]), then tears down the reconcilers of previous
// IDs and, once per ID, the leftovers of every other ID found by the tag,
// waiting until listings confirm each. It returns nil once all is done.
func (m *Moving) Reconcile(ctx context.Context) error {
	cur, old, sweep, err := m.state()
	if err != nil {
		return err
	}
	if err := cur.Reconcile(ctx); err != nil {
		return err
	}
	for _, o := range old {
		if err := o.Teardown(ctx); err != nil {
			return fmt.Errorf("%w: tear down load balancer %s after the move to %s: %w", ErrPreviousNotTornDown, o.current().ID, cur.current().ID, err)
		}
		m.done(o)
	}
	if sweep != nil {
		if wait := m.unsettled(cur); wait > 0 {
			t := cur.clock.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return fmt.Errorf("lbrecon: wait for the list lag after the teardown of the previous load balancers: %w", ctx.Err())
			case <-t.C():
			}
		}
		if err := sweep.Teardown(ctx); err != nil {
			return fmt.Errorf("%w: tear down load balancers other than %s: %w", ErrPreviousNotTornDown, cur.current().ID, err)
		}
		m.sweptFor(sweep)
	}
	return nil
}

// ReconcileOnce is the non-blocking [Moving.Reconcile]: one pass of the
// first thing not yet done (the current load balancer, a previous ID's
// teardown, the leftovers' teardown), whose Result it returns; Converged
// once everything is, and CurrentConverged once the current load
// balancer is, while the earlier ones are still torn down (an error of
// that teardown wraps [ErrPreviousNotTornDown]). See
// [Reconciler.ReconcileOnce].
func (m *Moving) ReconcileOnce(ctx context.Context) (Result, error) {
	cur, old, sweep, err := m.state()
	if err != nil {
		return Result{}, err
	}
	res, err := cur.ReconcileOnce(ctx)
	if err != nil || !res.Converged {
		return res, err
	}
	// The current one converged: every answer below says so.
	previous := func(res Result, err error, what string) (Result, error) {
		res.CurrentConverged = true
		if err != nil {
			err = fmt.Errorf("%w: tear down %s: %w", ErrPreviousNotTornDown, what, err)
		}
		return res, err
	}
	for _, o := range old {
		if res, err = o.TeardownOnce(ctx); err != nil || !res.Converged {
			return previous(res, err, "load balancer "+o.current().ID)
		}
		m.done(o)
	}
	if sweep != nil {
		if wait := m.unsettled(cur); wait > 0 {
			return previous(Result{RequeueAfter: wait, Plan: res.Plan}, nil, "")
		}
		if res, err = sweep.TeardownOnce(ctx); err != nil || !res.Converged {
			return previous(res, err, "the load balancers other than "+cur.current().ID)
		}
		m.sweptFor(sweep)
	}
	res.CurrentConverged = true
	return res, nil
}

// state returns what a call works on, making the sweep of cur's ID when
// it has not converged yet (nil once it has).
func (m *Moving) state() (*LoadBalancerReconciler, []*LoadBalancerReconciler, *Leftovers, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.sweep == nil && !m.swept {
		l, err := NewLeftovers(m.cfg, m.cur.current().ID)
		if err != nil {
			return nil, nil, nil, err
		}
		m.sweep = l
	}
	sweep := m.sweep
	if m.swept {
		sweep = nil
	}
	return m.cur, slices.Clone(m.old), sweep, nil
}

// done moves o, torn down, to past until the list lag has passed: its
// teardown converged at the first listing that showed its objects gone,
// and a replica may show them again until then.
func (m *Moving) done(o *LoadBalancerReconciler) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.old = slices.DeleteFunc(m.old, func(x *LoadBalancerReconciler) bool { return x == o })
	m.past = append(m.past, o)
	if o.cfg.Journal != nil {
		return // its teardown converged once its journaled destructions were confirmed
	}
	if at := o.horizonAfter(o.clock.Now()).at; at.After(m.settled) {
		m.settled = at
	}
}

// unsettled returns how long until a listing shows what the previous
// IDs' reconcilers destroyed no more, and once it does forgets them.
func (m *Moving) unsettled(cur *LoadBalancerReconciler) time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	if wait := m.settled.Sub(cur.clock.Now()); wait > 0 {
		return wait
	}
	m.past = nil
	return 0
}

// sweptFor records that sweep converged, unless the ID changed since.
func (m *Moving) sweptFor(sweep *Leftovers) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.sweep == sweep {
		m.swept = true
	}
}
