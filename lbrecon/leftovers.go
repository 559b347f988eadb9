package lbrecon

import (
	"context"
)

// TeardownExcept tears down every load balancer whose backends or
// frontends carry cfg.Tag and whose ID is not in keep, and waits until a
// listing shows their owned objects gone. It is for a host whose load
// balancer's ID changed, or that no longer wants one, after a restart or a
// failover, when the reconciler of the old ID went with the process that
// held it: the old load balancers are found by the tag in the listing.
// Empty strings in keep are ignored, so a host passes the ID it wants, or
// "" for none. See [Leftovers] for the rules and the non-blocking form.
func TeardownExcept(ctx context.Context, cfg Config, keep ...string) error {
	l, err := NewLeftovers(cfg, keep...)
	if err != nil {
		return err
	}
	return l.Teardown(ctx)
}

// Leftovers tears down the load balancers of an owner that the host no
// longer wants: those whose backends or frontends carry the ownership tag
// and whose ID is not kept. Every pass lists once by the tag and finds
// them anew, so one that appears later is torn down too; several are torn
// down together. The rules are those of [Reconciler.Teardown]: children
// (binds, servers) before parents, each parent once a listing shows its
// children gone, asynchronous deletion waited for and never re-issued,
// failed and pending objects destroyed; untagged objects, objects of
// another owner and every object of a kept load balancer are never
// touched. A bind or server whose parent is missing from the listing is
// left alone, since its load balancer is unknown. Like Reconciler.Teardown,
// a pass waits for pending owned objects, the kept load balancers'
// included.
type Leftovers struct {
	r *Reconciler
}

// NewLeftovers validates cfg and returns a Leftovers for cfg.Tag's owner
// that keeps the load balancers with the IDs in keep (empty strings are
// ignored). cfg is used as for [NewLoadBalancer]; cfg.Steps and cfg.Scope
// are set here. Keep one across TeardownOnce calls: it remembers the
// destructions no listing has confirmed yet.
func NewLeftovers(cfg Config, keep ...string) (*Leftovers, error) {
	kept := make(map[string]bool, len(keep))
	for _, id := range keep {
		if id != "" {
			kept[id] = true
		}
	}
	steps := LoadBalancer{}.Steps()
	for i := range steps {
		steps[i].Plan = func(context.Context, *Observation) (Changes, error) { return Changes{}, nil }
	}
	cfg.Steps, cfg.Scope = steps, ""
	r, err := New(cfg)
	if err != nil {
		return nil, err
	}
	r.down = func(st Step) func(context.Context, *Observation) (Changes, error) {
		return func(_ context.Context, obs *Observation) (Changes, error) {
			var ch Changes
			for _, o := range obs.Objects(st.Kind) {
				if leftover(o, obs, kept) {
					ch.Destroy = append(ch.Destroy, o)
				}
			}
			return ch, nil
		}
	}
	return &Leftovers{r: r}, nil
}

// leftover reports whether o belongs to a load balancer that is not kept.
// A backend or frontend says so in its spec. A bind or server belongs to
// its parent's load balancer; a parent listed but missing from obs is
// being destroyed by this teardown (the listing holds only owned objects,
// and only leftovers are destroyed), so it is a leftover too.
func leftover(o Object, obs *Observation, kept map[string]bool) bool {
	switch s := o.Spec.(type) {
	case BackendSpec:
		return !kept[s.LoadBalancer]
	case FrontendSpec:
		return !kept[s.LoadBalancer]
	}
	parents := refs(o)
	for _, k := range parents {
		if !obs.Known(k) {
			return false
		}
		if p, ok := obs.Get(k); ok && !leftover(p, obs, kept) {
			return false
		}
	}
	return len(parents) > 0
}

// Teardown destroys the leftovers and waits until a listing shows none;
// returns, errors and waits are those of [Reconciler.Teardown].
func (l *Leftovers) Teardown(ctx context.Context) error { return l.r.Teardown(ctx) }

// TeardownOnce makes one pass of [Leftovers.Teardown] without waiting and
// reports Converged once a listing shows no leftover, or when to call
// again; see [Reconciler.TeardownOnce].
func (l *Leftovers) TeardownOnce(ctx context.Context) (Result, error) { return l.r.TeardownOnce(ctx) }
