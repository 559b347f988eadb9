package lbrecontest

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/reconkit/reconkit/lbrecon"
)

// WaitFor waits until cond holds for the engine's objects, as [Engine.Objects]
// returns them (objects being deleted included), and returns nil; when ctx
// ends first it returns an error wrapping ctx.Err() that lists the objects
// cond last saw. cond is checked at once, after every change of the
// objects (through the API or the test hooks), and when a pending period or
// an asynchronous deletion ends on the engine's clock: no polling, and with
// a fake clock only the test's Step moves time. cond runs on the caller's
// goroutine, without the engine's lock, and must not keep the slice. Give
// ctx a deadline: a condition that never holds returns only when ctx ends.
func (e *Engine) WaitFor(ctx context.Context, cond func(objs []lbrecon.Object) bool) error {
	for {
		e.mu.Lock()
		if e.changed == nil {
			e.changed = make(chan struct{})
		}
		changed := e.changed
		e.mu.Unlock()
		objs := e.Objects()
		if cond(objs) {
			return nil
		}
		var tick <-chan time.Time
		stop := func() {}
		if next, ok := e.nextTransition(); ok {
			t := e.clock.NewTimer(next.Sub(e.clock.Now()))
			tick, stop = t.C(), func() { t.Stop() }
		}
		select {
		case <-ctx.Done():
			stop()
			return fmt.Errorf("lbrecontest: condition not met: %w; objects: %s", ctx.Err(), describe(objs))
		case <-changed:
		case <-tick:
		}
		stop()
	}
}

// nextTransition returns the next time an object turns from pending or a
// deletion completes.
func (e *Engine) nextTransition() (time.Time, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	now := e.clock.Now()
	var next time.Time
	consider := func(t time.Time) {
		if t.After(now) && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	for _, o := range e.objs {
		if o.State == lbrecon.StatePending {
			consider(o.readyAt)
		}
		consider(o.goneAt)
	}
	return next, !next.IsZero()
}

// WaitConverged waits, as [Engine.WaitFor] does, until the engine holds
// exactly what lb describes among the objects carrying tag (see
// [Converged]).
func (e *Engine) WaitConverged(ctx context.Context, lb lbrecon.LoadBalancer, tag string) error {
	return e.WaitFor(ctx, Converged(lb, tag))
}

// Converged returns a condition for [Engine.WaitFor]: among the objects
// carrying tag on load balancer lb.ID (its backends and frontends, and
// their binds and servers), each object lb describes exists exactly once,
// ok, with the described spec (parents, addresses and ports; a server's
// weight is not compared), and nothing else does, objects being deleted
// included. Untagged objects and other owners' are not looked at. A
// description with no ports is converged when the load balancer holds
// none of the tag's objects.
func Converged(lb lbrecon.LoadBalancer, tag string) func([]lbrecon.Object) bool {
	return func(objs []lbrecon.Object) bool {
		mine := map[lbrecon.Key]lbrecon.Object{} // backends and frontends on lb
		for _, o := range objs {
			switch s := o.Spec.(type) {
			case lbrecon.BackendSpec:
				if s.LoadBalancer == lb.ID {
					mine[o.Key()] = o
				}
			case lbrecon.FrontendSpec:
				if s.LoadBalancer == lb.ID {
					mine[o.Key()] = o
				}
			}
		}
		byName := map[string]lbrecon.Object{} // "kind/name" of the owned objects on lb
		for _, o := range objs {
			if !o.HasTag(tag) {
				continue
			}
			_, on := mine[o.Key()]
			for _, k := range LoadBalancerRefs(o) {
				_, on = mine[k]
			}
			if !on {
				continue
			}
			k := o.Kind + "/" + o.Name
			if _, dup := byName[k]; dup || o.State != lbrecon.StateOK {
				return false
			}
			byName[k] = o
		}
		want := 0
		find := func(kind, name string) (lbrecon.Object, bool) {
			want++
			o, ok := byName[kind+"/"+name]
			return o, ok
		}
		name := func(parts ...string) string { return strings.Join(append(parts, lb.Suffix), ".") }
		for _, p := range lb.Ports {
			b, ok := find(lbrecon.KindBackend, name(p.Name))
			if !ok || b.Spec != (lbrecon.BackendSpec{LoadBalancer: lb.ID}) {
				return false
			}
			f, ok := find(lbrecon.KindFrontend, name(p.Name))
			if !ok || f.Spec != (lbrecon.FrontendSpec{LoadBalancer: lb.ID, DefaultBackend: b.ID}) {
				return false
			}
			for _, a := range lb.Addresses {
				o, ok := find(lbrecon.KindBind, name(a.String(), p.Name))
				if !ok || o.Spec != (lbrecon.BindSpec{Frontend: f.ID, Address: a, Port: p.ExternalPort}) {
					return false
				}
			}
			for _, t := range lb.Targets {
				o, ok := find(lbrecon.KindServer, name(t.Name, p.Name))
				s, isServer := o.Spec.(lbrecon.ServerSpec)
				if !ok || !isServer || s.Backend != b.ID || s.Address != t.Address || s.Port != p.NodePort {
					return false
				}
			}
		}
		return want == len(byName)
	}
}

// describe lists objects for error messages.
func describe(objs []lbrecon.Object) string {
	if len(objs) == 0 {
		return "none"
	}
	s := make([]string, 0, len(objs))
	for _, o := range objs {
		s = append(s, fmt.Sprintf("%v %v", o, o.State))
	}
	return strings.Join(s, ", ")
}
