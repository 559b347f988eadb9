package lbrecon

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
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
	// "<target>.<port>.<suffix>"). It identifies the owner among untagged
	// objects, so it must be unique per owner on the load balancer.
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

// Claim reports whether an untagged object is one of this plan's, judged by
// its kind, its name's suffix and, for backends and frontends, its load
// balancer. Use it as [Config.Claim].
func (lb LoadBalancer) Claim(o Object) bool {
	if !strings.HasSuffix(o.Name, "."+lb.Suffix) {
		return false
	}
	switch s := o.Spec.(type) {
	case BackendSpec:
		return o.Kind == KindBackend && s.LoadBalancer == lb.ID
	case FrontendSpec:
		return o.Kind == KindFrontend && s.LoadBalancer == lb.ID
	case BindSpec:
		return o.Kind == KindBind
	case ServerSpec:
		return o.Kind == KindServer
	}
	return false
}

// Steps returns the plan's steps: backends; frontends after backends;
// binds after frontends; servers after backends (so servers are created
// alongside frontends).
func (lb LoadBalancer) Steps() []Step {
	return []Step{
		{Kind: KindBackend, DependsOn: []string{}, Plan: lb.planBackends},
		{Kind: KindFrontend, DependsOn: []string{KindBackend}, Plan: lb.planFrontends},
		{Kind: KindBind, DependsOn: []string{KindFrontend}, Plan: lb.planBinds},
		{Kind: KindServer, DependsOn: []string{KindBackend}, Plan: lb.planServers},
	}
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

func (lb LoadBalancer) planBackends(_ context.Context, obs *Observation) ([]Object, []Object, error) {
	desired := make([]Object, 0, len(lb.Ports))
	for _, p := range lb.Ports {
		desired = append(desired, Object{Kind: KindBackend, Name: lb.name(p.Name), Spec: BackendSpec{LoadBalancer: lb.ID}})
	}
	create, destroy := Diff(desired, ours(lb, obs, KindBackend, func(s BackendSpec) string { return s.LoadBalancer }))
	return create, destroy, nil
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

func (lb LoadBalancer) planFrontends(_ context.Context, obs *Observation) ([]Object, []Object, error) {
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
	create, destroy := Diff(desired, ours(lb, obs, KindFrontend, func(s FrontendSpec) string { return s.LoadBalancer }))
	return create, destroy, nil
}

// children returns the observed objects of kind, leaving out those whose
// parent (by ID) is an observed object of another load balancer.
func (lb LoadBalancer) children(obs *Observation, kind string, parentOf func(Object) string) []Object {
	var out []Object
	for _, o := range obs.Objects(kind) {
		if p, ok := obs.ByID(parentOf(o)); ok && !lb.onThisLB(p) {
			continue
		}
		out = append(out, o)
	}
	return out
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

func (lb LoadBalancer) planBinds(_ context.Context, obs *Observation) ([]Object, []Object, error) {
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
	observed := lb.children(obs, KindBind, func(o Object) string {
		s, _ := o.Spec.(BindSpec)
		return s.Frontend
	})
	create, destroy := Diff(desired, observed)
	return create, destroy, nil
}

func (lb LoadBalancer) planServers(_ context.Context, obs *Observation) ([]Object, []Object, error) {
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
	observed := lb.children(obs, KindServer, func(o Object) string {
		s, _ := o.Spec.(ServerSpec)
		return s.Backend
	})
	create, destroy := Diff(desired, observed)
	return create, destroy, nil
}

// LoadBalancerReconciler is a [Reconciler] running a [LoadBalancer] plan.
type LoadBalancerReconciler struct {
	*Reconciler
	lb LoadBalancer
}

// NewLoadBalancer validates lb and returns a reconciler for it. cfg.Steps,
// cfg.Claim and cfg.Scope are set from lb (Scope is the load balancer's ID);
// everything else in cfg is used as given.
func NewLoadBalancer(cfg Config, lb LoadBalancer) (*LoadBalancerReconciler, error) {
	if err := lb.Validate(); err != nil {
		return nil, err
	}
	lb.Ports = slices.Clone(lb.Ports)
	lb.Addresses = slices.Clone(lb.Addresses)
	lb.Targets = slices.Clone(lb.Targets)
	cfg.Steps, cfg.Claim, cfg.Scope = lb.Steps(), lb.Claim, lb.ID
	r, err := New(cfg)
	if err != nil {
		return nil, err
	}
	return &LoadBalancerReconciler{Reconciler: r, lb: lb}, nil
}

// Status lists once and returns, for every external address with a bind on
// one of this plan's frontends, the external ports bound there, sorted.
func (r *LoadBalancerReconciler) Status(ctx context.Context) (map[netip.Addr][]uint16, error) {
	obs, err := r.Observe(ctx)
	if err != nil {
		return nil, err
	}
	return StatusOf(r.lb, obs), nil
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
		if f, ok := obs.ByID(s.Frontend); !ok || f.Kind != KindFrontend || !lb.onThisLB(f) {
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
