package lbrecontest

import (
	"fmt"

	"github.com/reconkit/reconkit/backoff"
	"github.com/reconkit/reconkit/lbrecon"
)

// LoadBalancerRefs returns the parent of an object of the load-balancer plan.
func LoadBalancerRefs(o lbrecon.Object) []lbrecon.Key {
	switch s := o.Spec.(type) {
	case lbrecon.FrontendSpec:
		return []lbrecon.Key{{Kind: lbrecon.KindBackend, ID: s.DefaultBackend}}
	case lbrecon.BindSpec:
		return []lbrecon.Key{{Kind: lbrecon.KindFrontend, ID: s.Frontend}}
	case lbrecon.ServerSpec:
		return []lbrecon.Key{{Kind: lbrecon.KindBackend, ID: s.Backend}}
	case lbrecon.ListenerSpec:
		return []lbrecon.Key{{Kind: lbrecon.KindBackend, ID: s.DefaultBackend}}
	case lbrecon.HealthCheckSpec:
		return []lbrecon.Key{{Kind: lbrecon.KindBackend, ID: s.Backend}}
	}
	return nil
}

// lbScope returns the scope of the load balancer id: a load-balancer
// object's name (Config.LoadBalancerObjects), else id. Called with e.mu
// held.
func lbScope(e *Engine, id string) string {
	if p, ok := e.objs[lbrecon.Key{Kind: lbrecon.KindLoadBalancer, ID: id}]; ok {
		if s, ok := p.Spec.(lbrecon.LoadBalancerSpec); ok {
			return s.Name
		}
	}
	return id
}

// loadBalancerScope returns the load balancer an object belongs to.
// Called with e.mu held.
func loadBalancerScope(e *Engine, o lbrecon.Object) string {
	switch s := o.Spec.(type) {
	case lbrecon.LoadBalancerSpec:
		return s.Name
	case lbrecon.BackendSpec:
		return lbScope(e, s.LoadBalancer)
	case lbrecon.FrontendSpec:
		return lbScope(e, s.LoadBalancer)
	case lbrecon.ListenerSpec:
		return lbScope(e, s.LoadBalancer)
	}
	for _, k := range e.cfg.Refs(o) {
		if p, ok := e.objs[k]; ok {
			return loadBalancerScope(e, p.Object)
		}
	}
	return ""
}

// admit checks a creation against names and references.
func (e *Engine) admit(obj lbrecon.Object) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.cfg.MaxNameLen > 0 && len(obj.Name) > e.cfg.MaxNameLen {
		return backoff.Permanent(fmt.Errorf("lbrecontest: 400 name %q longer than %d", obj.Name, e.cfg.MaxNameLen))
	}
	if e.cfg.UniqueNames {
		for _, o := range e.objs {
			if o.Kind == obj.Kind && o.Name == obj.Name {
				return fmt.Errorf("lbrecontest: 409 %s name %q taken by %s: %w", obj.Kind, obj.Name, o.ID, lbrecon.ErrAlreadyExists)
			}
		}
	}
	if err := e.listenerFree(obj, lbrecon.Key{}); err != nil {
		return err
	}
	return e.refsExist(obj)
}

// listenerFree checks, with UniqueBinds, that no bind of the same load
// balancer other than self listens where obj, a bind, would. Called with
// e.mu held.
func (e *Engine) listenerFree(obj lbrecon.Object, self lbrecon.Key) error {
	s, ok := obj.Spec.(lbrecon.BindSpec)
	if !e.cfg.UniqueBinds || !ok {
		return nil
	}
	for k, o := range e.objs {
		if os, ok := o.Spec.(lbrecon.BindSpec); ok && k != self && os.Address == s.Address && os.Port == s.Port &&
			e.cfg.Scope(e, o.Object) == e.cfg.Scope(e, obj) {
			return fmt.Errorf("lbrecontest: 409 DuplicateListener: %v already listens on %v:%d: %w", o.Object, s.Address, s.Port, lbrecon.ErrConflict)
		}
	}
	return nil
}

// refsExist checks that obj's parents exist. Called with e.mu held.
func (e *Engine) refsExist(obj lbrecon.Object) error {
	if !e.cfg.Integrity {
		return nil
	}
	for _, k := range e.cfg.Refs(obj) {
		if p, ok := e.objs[k]; !ok || !p.goneAt.IsZero() {
			return fmt.Errorf("lbrecontest: 400 %v refers to missing %v: %w", obj, k, lbrecon.ErrConflict)
		}
	}
	return nil
}
