package lbrecontest_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/reconkit/reconkit/lbrecon"
	"github.com/reconkit/reconkit/lbrecon/lbrecontest"
)

// OnLoadBalancer places backends, frontends and listeners by their spec,
// binds, servers and health checks by their parent, and leaves out what
// belongs to another load balancer or whose parent is not listed.
func TestOnLoadBalancer(t *testing.T) {
	obj := func(kind, id string, spec any) lbrecon.Object {
		return lbrecon.Object{Kind: kind, ID: id, Name: id, Spec: spec}
	}
	objs := []lbrecon.Object{
		obj(lbrecon.KindBackend, "b1", lbrecon.BackendSpec{LoadBalancer: "lb-1"}),
		obj(lbrecon.KindBackend, "b2", lbrecon.BackendSpec{LoadBalancer: "lb-2"}),
		obj(lbrecon.KindFrontend, "f1", lbrecon.FrontendSpec{LoadBalancer: "lb-1", DefaultBackend: "b1"}),
		obj(lbrecon.KindListener, "l2", lbrecon.ListenerSpec{LoadBalancer: "lb-2", DefaultBackend: "b2"}),
		obj(lbrecon.KindBind, "bind1", lbrecon.BindSpec{Frontend: "f1"}),
		obj(lbrecon.KindServer, "s1", lbrecon.ServerSpec{Backend: "b1"}),
		obj(lbrecon.KindServer, "s2", lbrecon.ServerSpec{Backend: "b2"}),
		obj(lbrecon.KindHealthCheck, "h2", lbrecon.HealthCheckSpec{Backend: "b2"}),
		obj(lbrecon.KindServer, "orphan", lbrecon.ServerSpec{Backend: "gone"}),
	}
	ids := func(os []lbrecon.Object) []string {
		var out []string
		for _, o := range os {
			out = append(out, o.ID)
		}
		return out
	}
	require.Equal(t, []string{"b1", "f1", "bind1", "s1"}, ids(lbrecontest.OnLoadBalancer(objs, "lb-1")))
	require.Equal(t, []string{"b2", "l2", "s2", "h2"}, ids(lbrecontest.OnLoadBalancer(objs, "lb-2")))
	require.Empty(t, lbrecontest.OnLoadBalancer(objs, ""))
	require.Empty(t, lbrecontest.OnLoadBalancer(objs, "lb-3"))
}
