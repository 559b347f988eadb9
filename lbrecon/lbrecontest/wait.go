package lbrecontest

import (
	"context"
	"fmt"
	"slices"
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
		consider(o.assignedAt())
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
// carrying tag on load balancer lb.ID (with Provision, its load-balancer
// object, ok with an assigned status; its backends, frontends and
// listeners, and their binds, servers and health checks), each object lb
// describes exists exactly once, ok, with the described spec (parents,
// addresses and ports; a server's weight is not compared), and nothing
// else does, objects being deleted included. Binds are expected on
// lb.Addresses and, with Provision, on the assigned address. Untagged
// objects and other owners' are not looked at. A description with no
// ports and without Provision is converged when the load balancer holds
// none of the tag's objects, its load-balancer object included.
func Converged(lb lbrecon.LoadBalancer, tag string) func([]lbrecon.Object) bool {
	return func(objs []lbrecon.Object) bool {
		mine := map[lbrecon.Key]lbrecon.Object{} // the load-balancer object, backends, frontends and listeners on lb
		lbIDs := map[string]bool{lb.ID: true}
		for _, o := range objs {
			if s, ok := o.Spec.(lbrecon.LoadBalancerSpec); ok && s.Name == lb.ID && o.HasTag(tag) {
				mine[o.Key()], lbIDs[o.ID] = o, true
			}
		}
		for _, o := range objs {
			switch s := o.Spec.(type) {
			case lbrecon.BackendSpec:
				if lbIDs[s.LoadBalancer] {
					mine[o.Key()] = o
				}
			case lbrecon.FrontendSpec:
				if lbIDs[s.LoadBalancer] {
					mine[o.Key()] = o
				}
			case lbrecon.ListenerSpec:
				if lbIDs[s.LoadBalancer] {
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
				if _, ok := mine[k]; ok {
					on = true
				}
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
		id, addrs := lb.ID, lb.Addresses
		if lb.Provision {
			o, ok := find(lbrecon.KindLoadBalancer, name("lb"))
			st, known := lbrecon.StatusOfObject(o)
			if !ok || !known || o.Spec != (lbrecon.LoadBalancerSpec{Name: lb.ID}) {
				return false
			}
			id = o.ID
			if st.Address.IsValid() && !slices.Contains(addrs, st.Address) {
				addrs = append(slices.Clone(addrs), st.Address)
			}
		}
		for _, p := range lb.Ports {
			b, ok := find(lbrecon.KindBackend, name(p.Name))
			if !ok || b.Spec != (lbrecon.BackendSpec{LoadBalancer: id}) {
				return false
			}
			if lb.Listening == lbrecon.ListenPorts {
				l, ok := find(lbrecon.KindListener, name(p.Name))
				if !ok || l.Spec != (lbrecon.ListenerSpec{LoadBalancer: id, DefaultBackend: b.ID, Port: p.ExternalPort}) {
					return false
				}
			} else {
				f, ok := find(lbrecon.KindFrontend, name(p.Name))
				if !ok || f.Spec != (lbrecon.FrontendSpec{LoadBalancer: id, DefaultBackend: b.ID}) {
					return false
				}
				for _, a := range addrs {
					o, ok := find(lbrecon.KindBind, name(a.String(), p.Name))
					if !ok || o.Spec != (lbrecon.BindSpec{Frontend: f.ID, Address: a, Port: p.ExternalPort}) {
						return false
					}
				}
			}
			for _, t := range lb.Targets {
				o, ok := find(lbrecon.KindServer, name(t.Name, p.Name))
				s, isServer := o.Spec.(lbrecon.ServerSpec)
				if !ok || !isServer || s.Backend != b.ID || s.Address != t.Address || s.Port != p.NodePort {
					return false
				}
			}
			if hc := lb.HealthCheck; hc != nil {
				o, ok := find(lbrecon.KindHealthCheck, name(p.Name))
				if !ok || o.Spec != (lbrecon.HealthCheckSpec{Backend: b.ID, Port: hc.Port, Path: hc.Path}) {
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
