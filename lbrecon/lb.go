package lbrecon

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
)

// Kinds of the load-balancer plan.
const (
	KindBackend  = "backend"
	KindFrontend = "frontend"
	KindBind     = "bind"
	KindServer   = "server"
)

// BackendSpec describes a backend: a pool of servers on a load balancer.
type BackendSpec struct {
	LoadBalancer string
}

// FrontendSpec describes a frontend on a load balancer forwarding to a backend.
type FrontendSpec struct {
	LoadBalancer   string
	DefaultBackend string // the backend's ID
}

// BindSpec describes a frontend listening on an external address and port.
type BindSpec struct {
	Frontend string // the frontend's ID
	Address  netip.Addr
	Port     uint16
}

// ServerSpec describes a target server in a backend.
type ServerSpec struct {
	Backend string // the backend's ID
	Address netip.Addr
	Port    uint16
	// Weight is the server's share of traffic; 0 asks for the provider's
	// default, and then any weight the provider reports is up to date.
	Weight uint16
}

// Port is one forwarded port: traffic to ExternalPort on every external
// address goes to NodePort on every target.
type Port struct {
	Name         string
	NodePort     uint16
	ExternalPort uint16
}

// Target is a server traffic is forwarded to.
type Target struct {
	Name    string
	Address netip.Addr
}

// LoadBalancer is the desired state of one load balancer's share that one
// owner manages: per port a backend and a frontend, per frontend a bind per
// external address, per backend a server per target.
type LoadBalancer struct {
	// ID is the load balancer's identifier. Backends and frontends of other
	// load balancers are ignored.
	ID string
	// Suffix ends every object name ("<port>.<suffix>", "<address>.<port>.<suffix>",
	// "<target>.<port>.<suffix>"). Ownership is proven by the tag, not by
	// the name: an untagged object is adopted only when its kind, exact name
	// and spec (including its parent, which must be this plan's) are those
	// of an object about to be created.
	Suffix    string
	Ports     []Port
	Addresses []netip.Addr
	Targets   []Target
}

// Validate reports a clear error for an unusable description.
func (lb LoadBalancer) Validate() error {
	var errs []error
	if lb.ID == "" {
		errs = append(errs, errors.New("ID is empty"))
	}
	if lb.Suffix == "" || strings.ContainsAny(lb.Suffix, " \t\n") {
		errs = append(errs, fmt.Errorf("suffix %q must be non-empty without spaces", lb.Suffix))
	}
	names, ext := map[string]bool{}, map[uint16]bool{}
	for _, p := range lb.Ports {
		if p.Name == "" || strings.ContainsAny(p.Name, ". \t\n") {
			errs = append(errs, fmt.Errorf("port name %q must be non-empty without dots or spaces", p.Name))
		}
		if names[p.Name] {
			errs = append(errs, fmt.Errorf("port name %q repeated", p.Name))
		}
		if ext[p.ExternalPort] {
			errs = append(errs, fmt.Errorf("external port %d repeated", p.ExternalPort))
		}
		if p.NodePort == 0 || p.ExternalPort == 0 {
			errs = append(errs, fmt.Errorf("port %q: node and external port must be non-zero", p.Name))
		}
		names[p.Name], ext[p.ExternalPort] = true, true
	}
	addrs := map[netip.Addr]bool{}
	for _, a := range lb.Addresses {
		if !a.IsValid() {
			errs = append(errs, errors.New("invalid external address"))
		}
		if addrs[a] {
			errs = append(errs, fmt.Errorf("external address %v repeated", a))
		}
		addrs[a] = true
	}
	targets := map[string]bool{}
	for _, t := range lb.Targets {
		if t.Name == "" || strings.ContainsAny(t.Name, " \t\n") || !t.Address.IsValid() {
			errs = append(errs, fmt.Errorf("target %q needs a name without spaces and a valid address", t.Name))
		}
		if targets[t.Name] {
			errs = append(errs, fmt.Errorf("target name %q repeated", t.Name))
		}
		targets[t.Name] = true
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: load balancer: %w", ErrInvalidConfig, errors.Join(errs...))
	}
	return nil
}

func (lb LoadBalancer) name(parts ...string) string {
	return strings.Join(append(parts, lb.Suffix), ".")
}

// Steps returns the plan's steps: backends; frontends after backends;
// binds after frontends; servers after backends (so servers are created
// alongside frontends). Each object is created once its parent is ok.
func (lb LoadBalancer) Steps() []Step {
	return []Step{
		{Kind: KindBackend, Plan: lb.planBackends},
		{Kind: KindFrontend, DependsOn: []string{KindBackend}, Refs: refs, Plan: lb.planFrontends},
		{Kind: KindBind, DependsOn: []string{KindFrontend}, Refs: refs, Plan: lb.planBinds},
		{Kind: KindServer, DependsOn: []string{KindBackend}, Refs: refs, Plan: lb.planServers},
	}
}

// refs returns the parent of an object of the load-balancer plan.
func refs(o Object) []Key {
	switch s := o.Spec.(type) {
	case FrontendSpec:
		return []Key{{Kind: KindBackend, ID: s.DefaultBackend}}
	case BindSpec:
		return []Key{{Kind: KindFrontend, ID: s.Frontend}}
	case ServerSpec:
		return []Key{{Kind: KindBackend, ID: s.Backend}}
	}
	return nil
}

// compare is the load-balancer plan's comparison: a frontend's backend, a
// bind's port and a server's port change in place; a server's or bind's
// address, and the parent of a bind or server, need a new object.
func compare(d, o Object) Verdict {
	switch ds := d.Spec.(type) {
	case BackendSpec:
		if os, ok := o.Spec.(BackendSpec); ok && os == ds {
			return UpToDate
		}
	case FrontendSpec:
		os, ok := o.Spec.(FrontendSpec)
		switch {
		case !ok || os.LoadBalancer != ds.LoadBalancer:
		case os == ds:
			return UpToDate
		default:
			return Updatable
		}
	case BindSpec:
		os, ok := o.Spec.(BindSpec)
		switch {
		case !ok || os.Frontend != ds.Frontend || os.Address != ds.Address:
		case os == ds:
			return UpToDate
		default:
			return Updatable
		}
	case ServerSpec:
		os, ok := o.Spec.(ServerSpec)
		if ds.Weight == 0 {
			os.Weight = 0 // defaulted by the provider
		}
		switch {
		case !ok || os.Backend != ds.Backend || os.Address != ds.Address:
		case os == ds:
			return UpToDate
		default:
			return Updatable
		}
	}
	return Replace
}

// ours returns the observed objects of a kind on this load balancer.
func ours[S BackendSpec | FrontendSpec](lb LoadBalancer, obs *Observation, kind string, loadBalancer func(S) string) []Object {
	var out []Object
	for _, o := range obs.Objects(kind) {
		if s, ok := o.Spec.(S); ok && loadBalancer(s) == lb.ID {
			out = append(out, o)
		}
	}
	return out
}

func (lb LoadBalancer) planBackends(_ context.Context, obs *Observation) (Changes, error) {
	desired := make([]Object, 0, len(lb.Ports))
	for _, p := range lb.Ports {
		desired = append(desired, Object{Kind: KindBackend, Name: lb.name(p.Name), Spec: BackendSpec{LoadBalancer: lb.ID}})
	}
	return Diff(desired, ours(lb, obs, KindBackend, func(s BackendSpec) string { return s.LoadBalancer }), compare), nil
}

// parent returns the kept object of kind named name on this load balancer.
// Earlier steps removed duplicates and stale objects from obs, so at most a
// few candidates remain; the best one is taken.
func parent(objs []Object, name string) (Object, bool) {
	var best Object
	found := false
	for _, o := range objs {
		if o.Name == name && (!found || better(o, best)) {
			best, found = o, true
		}
	}
	return best, found
}

func (lb LoadBalancer) planFrontends(_ context.Context, obs *Observation) (Changes, error) {
	backends := ours(lb, obs, KindBackend, func(s BackendSpec) string { return s.LoadBalancer })
	desired := make([]Object, 0, len(lb.Ports))
	for _, p := range lb.Ports {
		b, ok := parent(backends, lb.name(p.Name))
		if !ok {
			continue
		}
		desired = append(desired, Object{Kind: KindFrontend, Name: lb.name(p.Name),
			Spec: FrontendSpec{LoadBalancer: lb.ID, DefaultBackend: b.ID}})
	}
	return Diff(desired, ours(lb, obs, KindFrontend, func(s FrontendSpec) string { return s.LoadBalancer }), compare), nil
}

// children returns the observed objects of kind, leaving out those whose
// parent is an object of another load balancer. A parent missing from the
// listing altogether is an inconsistent answer.
func (lb LoadBalancer) children(obs *Observation, kind string) ([]Object, error) {
	var out []Object
	for _, o := range obs.Objects(kind) {
		mine := true
		for _, k := range refs(o) {
			if !obs.Known(k) {
				return nil, fmt.Errorf("%w: %v refers to %v, which is not listed", ErrInconsistent, o, k)
			}
			if p, ok := obs.Get(k); ok && !lb.onThisLB(p) {
				mine = false
			}
		}
		if mine {
			out = append(out, o)
		}
	}
	return out, nil
}

func (lb LoadBalancer) onThisLB(o Object) bool {
	switch s := o.Spec.(type) {
	case BackendSpec:
		return s.LoadBalancer == lb.ID
	case FrontendSpec:
		return s.LoadBalancer == lb.ID
	}
	return false
}

func (lb LoadBalancer) planBinds(_ context.Context, obs *Observation) (Changes, error) {
	frontends := ours(lb, obs, KindFrontend, func(s FrontendSpec) string { return s.LoadBalancer })
	desired := make([]Object, 0, len(lb.Ports)*len(lb.Addresses))
	for _, p := range lb.Ports {
		f, ok := parent(frontends, lb.name(p.Name))
		if !ok {
			continue
		}
		for _, a := range lb.Addresses {
			desired = append(desired, Object{Kind: KindBind, Name: lb.name(a.String(), p.Name),
				Spec: BindSpec{Frontend: f.ID, Address: a, Port: p.ExternalPort}})
		}
	}
	observed, err := lb.children(obs, KindBind)
	if err != nil {
		return Changes{}, err
	}
	return unblockListeners(Diff(desired, observed, compare), observed), nil
}

// listener is what a bind holds on a provider that refuses two binds on
// one address and port.
type listener struct {
	addr netip.Addr
	port uint16
}

func listenerOf(o Object) (listener, bool) {
	s, ok := o.Spec.(BindSpec)
	return listener{s.Address, s.Port}, ok
}

// unblockListeners moves to ch.Break the observed binds that hold a
// listener a created or updated bind needs and would never give it up in
// time: binds destroyed anyway, which make-before-break would keep until
// the binds they block are in service, and, in each cycle of binds taking
// each other's listeners (two ports swapping external ports), the bind of
// the greatest name. A bind that moves to a free listener is left to its
// update: the binds waiting for its listener get it on a later pass.
func unblockListeners(ch Changes, observed []Object) Changes {
	holder := make(map[listener]Object, len(observed))
	for _, o := range observed {
		if l, ok := listenerOf(o); ok {
			holder[l] = o
		}
	}
	needed := make(map[listener]bool, len(ch.Create)+len(ch.Update))
	moves := make(map[Key]listener, len(ch.Update)) // observed bind -> listener it moves to
	for _, c := range ch.Create {
		if l, ok := listenerOf(c); ok {
			needed[l] = true
		}
	}
	for _, u := range ch.Update {
		if l, ok := listenerOf(u.Desired); ok {
			needed[l] = true
			moves[u.Current.Key()] = l
		}
	}
	breaks := make(map[Key]bool)
	for _, d := range ch.Destroy {
		if l, ok := listenerOf(d); ok && needed[l] {
			breaks[d.Key()] = true
		}
	}
	for _, u := range ch.Update {
		start := u.Current.Key()
		cycle := []Object{u.Current}
		for cur := start; ; {
			h, ok := holder[moves[cur]]
			if _, moving := moves[h.Key()]; !ok || !moving || h.Key() == cur {
				break // the listener is free, or its holder stays or goes anyway
			}
			if h.Key() == start {
				last := slices.MaxFunc(cycle, func(a, b Object) int { return strings.Compare(a.Name, b.Name) })
				breaks[last.Key()] = true
				break
			}
			if slices.ContainsFunc(cycle, func(o Object) bool { return o.Key() == h.Key() }) || len(cycle) > len(moves) {
				break // a cycle that start only leads into: its members find it
			}
			cycle = append(cycle, h)
			cur = h.Key()
		}
	}
	if len(breaks) == 0 {
		return ch
	}
	keep := func(o Object) bool {
		if breaks[o.Key()] {
			ch.Break = append(ch.Break, o)
			return false
		}
		return true
	}
	ch.Destroy = slices.DeleteFunc(ch.Destroy, func(o Object) bool { return !keep(o) })
	ch.Update = slices.DeleteFunc(ch.Update, func(u Change) bool { return !keep(u.Current) })
	return ch
}

func (lb LoadBalancer) planServers(_ context.Context, obs *Observation) (Changes, error) {
	backends := ours(lb, obs, KindBackend, func(s BackendSpec) string { return s.LoadBalancer })
	desired := make([]Object, 0, len(lb.Ports)*len(lb.Targets))
	for _, p := range lb.Ports {
		b, ok := parent(backends, lb.name(p.Name))
		if !ok {
			continue
		}
		for _, t := range lb.Targets {
			desired = append(desired, Object{Kind: KindServer, Name: lb.name(t.Name, p.Name),
				Spec: ServerSpec{Backend: b.ID, Address: t.Address, Port: p.NodePort}})
		}
	}
	observed, err := lb.children(obs, KindServer)
	if err != nil {
		return Changes{}, err
	}
	return Diff(desired, observed, compare), nil
}

// LoadBalancerReconciler is a [Reconciler] running a [LoadBalancer] plan.
type LoadBalancerReconciler struct {
	*Reconciler
	mu sync.Mutex
	lb LoadBalancer
}

// NewLoadBalancer validates lb and returns a reconciler for it. cfg.Steps
// and cfg.Scope are set from lb (Scope is the load balancer's ID);
// everything else in cfg is used as given. Keep one reconciler per load
// balancer for as long as the host manages it, and give it new
// descriptions with SetLoadBalancer: it remembers unconfirmed writes,
// failure counts and how long the provider takes between calls.
func NewLoadBalancer(cfg Config, lb LoadBalancer) (*LoadBalancerReconciler, error) {
	if err := lb.Validate(); err != nil {
		return nil, err
	}
	lr := &LoadBalancerReconciler{lb: lb.clone()}
	steps := lb.Steps()
	for i := range steps {
		kind := steps[i].Kind
		steps[i].Plan = func(ctx context.Context, obs *Observation) (Changes, error) {
			return lr.current().plan(ctx, kind, obs)
		}
	}
	cfg.Steps, cfg.Scope = steps, lb.ID
	r, err := New(cfg)
	if err != nil {
		return nil, err
	}
	r.down = func(st Step) func(context.Context, *Observation) (Changes, error) {
		return func(ctx context.Context, obs *Observation) (Changes, error) {
			lb := lr.current()
			lb.Ports = nil
			return lb.plan(ctx, st.Kind, obs)
		}
	}
	lr.Reconciler = r
	return lr, nil
}

// Teardown destroys every object this reconciler owns on its load balancer
// (backends and frontends of its ID, and their binds and servers) and waits
// until a listing shows them gone; see [Reconciler.Teardown]. Objects of
// other load balancers carrying the same tag are left alone. A host calls
// it when the load balancer is removed, or on the old reconciler when the
// load balancer's ID changes (the new ID gets a new reconciler); when that
// reconciler is gone (a restart, a failover), [TeardownExcept] finds the
// old load balancers by the tag. The
// description is kept: a later Reconcile creates it again.
func (r *LoadBalancerReconciler) Teardown(ctx context.Context) error {
	return r.Reconciler.Teardown(ctx)
}

// TeardownOnce is the non-blocking [LoadBalancerReconciler.Teardown], for a
// host's requeue loop; see [Reconciler.TeardownOnce].
func (r *LoadBalancerReconciler) TeardownOnce(ctx context.Context) (Result, error) {
	return r.Reconciler.TeardownOnce(ctx)
}

// SetLoadBalancer replaces the desired description; the next pass plans for
// it. The load balancer's ID cannot change (it is the scope of every
// listing): tear the old one down with Teardown, and make a new reconciler
// for the new ID.
func (r *LoadBalancerReconciler) SetLoadBalancer(lb LoadBalancer) error {
	if err := lb.Validate(); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if lb.ID != r.lb.ID {
		return fmt.Errorf("%w: load balancer ID %q cannot change to %q", ErrInvalidConfig, r.lb.ID, lb.ID)
	}
	r.lb = lb.clone()
	return nil
}

func (r *LoadBalancerReconciler) current() LoadBalancer {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lb
}

func (lb LoadBalancer) clone() LoadBalancer {
	lb.Ports = slices.Clone(lb.Ports)
	lb.Addresses = slices.Clone(lb.Addresses)
	lb.Targets = slices.Clone(lb.Targets)
	return lb
}

// plan runs the step of kind.
func (lb LoadBalancer) plan(ctx context.Context, kind string, obs *Observation) (Changes, error) {
	switch kind {
	case KindBackend:
		return lb.planBackends(ctx, obs)
	case KindFrontend:
		return lb.planFrontends(ctx, obs)
	case KindBind:
		return lb.planBinds(ctx, obs)
	}
	return lb.planServers(ctx, obs)
}

// Status lists once and returns, for every external address with a bind on
// one of this plan's frontends, the external ports bound there, sorted.
func (r *LoadBalancerReconciler) Status(ctx context.Context) (map[netip.Addr][]uint16, error) {
	obs, err := r.Observe(ctx)
	if err != nil {
		return nil, err
	}
	return StatusOf(r.current(), obs), nil
}

// StatusOf computes the address-to-ports map of [LoadBalancerReconciler.Status]
// from an observation.
func StatusOf(lb LoadBalancer, obs *Observation) map[netip.Addr][]uint16 {
	out := make(map[netip.Addr][]uint16)
	for _, b := range obs.Objects(KindBind) {
		s, ok := b.Spec.(BindSpec)
		if !ok {
			continue
		}
		if f, ok := obs.Get(Key{Kind: KindFrontend, ID: s.Frontend}); !ok || f.Kind != KindFrontend || !lb.onThisLB(f) {
			continue
		}
		if !slices.Contains(out[s.Address], s.Port) {
			out[s.Address] = append(out[s.Address], s.Port)
		}
	}
	for _, ports := range out {
		slices.Sort(ports)
	}
	return out
}
