package lbrecontest

import "github.com/reconkit/reconkit/lbrecon"

// OnLoadBalancer returns the objects among objs that belong to load
// balancer id, in their order: backends, frontends and listeners by the
// load balancer their spec names; binds through their frontend, servers
// and health checks through their backend, when that parent is among
// objs. Tests use it to see what one load balancer holds at the provider
// (Engine.Objects), for instance during a move between two.
func OnLoadBalancer(objs []lbrecon.Object, id string) []lbrecon.Object {
	byKey := make(map[lbrecon.Key]lbrecon.Object, len(objs))
	for _, o := range objs {
		byKey[o.Key()] = o
	}
	named := func(o lbrecon.Object) string {
		switch s := o.Spec.(type) {
		case lbrecon.BackendSpec:
			return s.LoadBalancer
		case lbrecon.FrontendSpec:
			return s.LoadBalancer
		case lbrecon.ListenerSpec:
			return s.LoadBalancer
		}
		return ""
	}
	of := func(o lbrecon.Object) string {
		var parent lbrecon.Key
		switch s := o.Spec.(type) {
		case lbrecon.BindSpec:
			parent = lbrecon.Key{Kind: lbrecon.KindFrontend, ID: s.Frontend}
		case lbrecon.ServerSpec:
			parent = lbrecon.Key{Kind: lbrecon.KindBackend, ID: s.Backend}
		case lbrecon.HealthCheckSpec:
			parent = lbrecon.Key{Kind: lbrecon.KindBackend, ID: s.Backend}
		default:
			return named(o)
		}
		p, ok := byKey[parent]
		if !ok {
			return ""
		}
		return named(p)
	}
	var out []lbrecon.Object
	for _, o := range objs {
		if id != "" && of(o) == id {
			out = append(out, o)
		}
	}
	return out
}
