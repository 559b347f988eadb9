package lbrecon

import (
	"context"
	"fmt"
	"sync"
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
// longer wants: those whose backends, frontends or listeners carry the
// ownership tag and whose ID is not kept, and the provisioned
// load-balancer objects ([LoadBalancer.Provision]) whose name (the plan's
// ID) is not kept, with the objects under them. Every pass lists once by the tag and finds
// them anew, so one that appears later is torn down too; several are torn
// down together. The rules are those of [Reconciler.Teardown]: children
// (binds, servers, health checks; backends, frontends and listeners of a
// load-balancer object) before parents, each parent once a listing shows its
// children gone, asynchronous deletion waited for and never re-issued,
// failed and pending objects destroyed; untagged objects and objects of
// another owner are never touched. The kept load balancers' objects are
// left out of every pass: they are never touched, and their states (one
// pending for ever, one failed) neither hold the teardown back nor fail
// it. A bind or server belongs to the load balancer of its parent; one
// whose parent is not listed with the tag is left alone.
//
// A load balancer that a crashed predecessor was creating may show only
// within the list lag of its last call, which ended before the Leftovers
// was made: Teardown and TeardownOnce report convergence only from a
// listing started at the horizon of the Leftovers' making (ListLag after
// it, or the ListLagListings+1-th listing), so such a late creation is
// torn down too. A Leftovers kept into a later leadership term (a call
// whose context carries a new fencing token) waits the same way from that
// term's beginning: a leader of the terms in between may have created on
// an old ID too.
type Leftovers struct {
	r       *Reconciler
	horizon horizon // a listing from here on shows what predecessors made
}

// NewLeftovers validates cfg and returns a Leftovers for cfg.Tag's owner
// that keeps the load balancers with the IDs in keep (empty strings are
// ignored). cfg is used as for [NewLoadBalancer]; cfg.Steps and cfg.Scope
// are set here; of cfg.Journal (optional here) only the destructions on
// the load balancers not kept are read and written. Keep one across TeardownOnce calls: it remembers the
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
	// The wrapper below hides the engine's declarations: take them first.
	if ll, ok := cfg.Engine.(ListLagger); ok && cfg.ListLag == 0 {
		cfg.ListLag = max(ll.ListLag(), 0)
	}
	if ll, ok := cfg.Engine.(ListingLagger); ok && cfg.ListLagListings == 0 {
		cfg.ListLagListings = max(ll.ListLagListings(), 0)
	}
	on := &scopes{of: make(map[Key]string)}
	cfg.Engine = leftoverEngine{Engine: cfg.Engine, tag: cfg.Tag, kept: kept, on: on}
	if cfg.Journal == nil {
		cfg.Journal = NoJournal
	}
	r, err := New(cfg)
	if err != nil {
		return nil, err
	}
	// A teardown creates nothing: of the journal, it reads and writes
	// only the destructions on the load balancers it does not keep, each
	// under its load balancer's ID, so that a reconciler of that ID (a
	// move back) knows them; the creations are the load balancer
	// reconcilers', and removing them here would lose them.
	r.entries = func(in Intent) bool { return in.ID != "" && in.Scope != "" && !kept[in.Scope] }
	r.scopeOf = on.get
	return &Leftovers{r: r, horizon: r.horizonAfter(r.clock.Now())}, nil
}

// scopes holds the load balancer of each object a leftoverEngine listed
// last: the scope its destruction is journaled under.
type scopes struct {
	mu sync.Mutex
	of map[Key]string
}

func (s *scopes) get(o Object) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.of[o.Key()]
}

func (s *scopes) set(of map[Key]string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.of = of
}

// current returns the horizon a converged teardown waits for: the
// Leftovers' own, or, once a later leadership term began, that term's
// (another leader may have created on an old ID in between).
func (l *Leftovers) current() horizon {
	if h := l.r.sinceTerm(); h != (horizon{}) && (h.at.After(l.horizon.at) || h.n > l.horizon.n) {
		return h
	}
	return l.horizon
}

// pastHorizon begins the term of ctx's token (see [Config.Admit]) and
// reports whether the next listing is at or past the horizon.
func (l *Leftovers) pastHorizon(ctx context.Context) (bool, error) {
	if err := l.r.beginTerm(ctx); err != nil {
		return false, err
	}
	return l.current().reachedBy(listing{at: l.r.clock.Now(), n: l.r.listings.Load() + 1}), nil
}

// leftoverEngine lists only the owned objects of load balancers that are
// not kept, so that the reconciler's teardown, which destroys every owned
// object it is shown, destroys exactly those. Other calls go to the
// provider's engine as they are (a teardown makes no Create, Update or
// Repair).
type leftoverEngine struct {
	Engine
	tag  string
	kept map[string]bool
	on   *scopes
}

func (e leftoverEngine) List(ctx context.Context, q Query) ([]Object, error) {
	objs, err := e.Engine.List(ctx, q)
	if err != nil {
		return nil, err
	}
	owned := make(map[Key]Object, len(objs))
	for _, o := range objs {
		if o.HasTag(e.tag) {
			owned[o.Key()] = o
		}
	}
	var out []Object
	on := make(map[Key]string)
	for _, o := range objs {
		if o.HasTag(e.tag) && e.leftover(o, owned) {
			out = append(out, o)
			on[o.Key()] = lbOf(o, owned)
		}
	}
	e.on.set(on)
	return out, nil
}

// lbOf returns the ID of the load balancer o is on (the plan's ID, for
// a provisioned one): its own name for a load-balancer object, the one
// its spec names for a backend, frontend or listener, its parent's for a
// bind or server; "" when no listed owned object says.
func lbOf(o Object, owned map[Key]Object) string {
	if s, ok := o.Spec.(LoadBalancerSpec); ok {
		return s.Name
	}
	if id, ok := attachedTo(o); ok {
		if p, ok := owned[Key{Kind: KindLoadBalancer, ID: id}]; ok {
			return lbOf(p, owned)
		}
		return id
	}
	for _, k := range refs(o) {
		if p, ok := owned[k]; ok {
			return lbOf(p, owned)
		}
	}
	return ""
}

// leftover reports whether o belongs to a load balancer that is not kept:
// a backend or frontend says so in its spec, a bind or server through its
// parent, which must be owned and listed.
func (e leftoverEngine) leftover(o Object, owned map[Key]Object) bool {
	if s, ok := o.Spec.(LoadBalancerSpec); ok {
		return !e.kept[s.Name]
	}
	if id, ok := attachedTo(o); ok {
		return e.leftoverOn(id, owned)
	}
	parents := refs(o)
	for _, k := range parents {
		p, ok := owned[k]
		if !ok || !e.leftover(p, owned) {
			return false
		}
	}
	return len(parents) > 0
}

// leftoverOn reports whether the load balancer id is not kept: id is a
// load-balancer object's, whose name says (a provisioned one), or the
// load balancer's own.
func (e leftoverEngine) leftoverOn(id string, owned map[Key]Object) bool {
	if p, ok := owned[Key{Kind: KindLoadBalancer, ID: id}]; ok {
		return e.leftover(p, owned)
	}
	return !e.kept[id]
}

// Teardown destroys the leftovers and waits until a listing at or past
// the horizon shows none; returns, errors and waits are those of
// [Reconciler.Teardown].
func (l *Leftovers) Teardown(ctx context.Context) error {
	for {
		past, err := l.pastHorizon(ctx)
		if err != nil {
			return err
		}
		if err := l.r.Teardown(ctx); err != nil || past {
			return err
		}
		// Converged before the horizon: a late creation may still show.
		h := l.current()
		wait := max(h.at.Sub(l.r.clock.Now()), l.r.cfg.PollInterval)
		if h.at.IsZero() {
			wait = l.r.cfg.PollInterval // a lag in listings: list again
		}
		t := l.r.clock.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("lbrecon: wait for the list lag before the last look for leftovers: %w", ctx.Err())
		case <-t.C():
		}
	}
}

// TeardownOnce makes one pass of [Leftovers.Teardown] without waiting and
// reports Converged once a listing at or past the horizon shows no
// leftover, or when to call again; see [Reconciler.TeardownOnce].
func (l *Leftovers) TeardownOnce(ctx context.Context) (Result, error) {
	past, err := l.pastHorizon(ctx)
	if err != nil {
		// The pass answers the fence's refusal as its own: an error, or
		// a transient result for a fence that could not be reached.
		return l.r.TeardownOnce(ctx)
	}
	res, err := l.r.TeardownOnce(ctx)
	if err != nil || !res.Converged || past {
		return res, err
	}
	res.Converged, res.Confirming = false, true
	res.RequeueAfter = l.r.cfg.PollInterval
	if h := l.current(); !h.at.IsZero() {
		res.RequeueAfter = max(h.at.Sub(l.r.clock.Now()), l.r.cfg.PollInterval)
	}
	return res, nil
}
