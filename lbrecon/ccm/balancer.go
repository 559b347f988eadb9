package ccm

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	cloudprovider "k8s.io/cloud-provider"
	"k8s.io/cloud-provider/api"
	"k8s.io/utils/clock"

	"github.com/reconkit/reconkit/lbrecon"
)

// DefaultTagKey is the key of the ownership tag when Config.TagKey is
// empty; the tag's value is the Service's UID.
const DefaultTagKey = "kubernetes-service-uid"

// busyRetry is the RetryAfter of a call that found another call for the
// same Service in progress.
const busyRetry = time.Second

// Config configures a [Balancer].
type Config struct {
	// Engine is the provider's API. Required. Every write goes through
	// lbrecon.Guard with a check of the term's fencing token.
	Engine lbrecon.Engine
	// Mapping turns Services and nodes into load balancers. Required. It
	// is called by EnsureLoadBalancer and UpdateLoadBalancer only:
	// GetLoadBalancer and EnsureLoadBalancerDeleted work from the
	// Service's UID alone.
	Mapping Mapping
	// Token returns the fencing token of the leader term the
	// cloud-controller-manager runs in (election.Leadership's Token, or
	// the term's lease generation). An error refuses every write of the
	// call, which returns it. Required.
	Token func(ctx context.Context) (uint64, error)
	// Admit is the fence the token is checked against before every write
	// (see lbrecon.CheckToken). Nil means an lbrecon.Fence in memory,
	// which refuses a term older than the newest this Balancer saw. It
	// is also every reconciler's lbrecon.Config.Admit: a call that brings
	// a token not seen yet raises the fence to it before that call reads
	// anything, so that the fence refuses the deposed term's writes from
	// then on, and each reconciler begins the new term (see the package
	// documentation).
	Admit func(token uint64) error
	// Journal keeps every Service's intents (the creations about to be
	// sent) where a successor finds them. Required: [NewConfigMapJournal]
	// is the crash-safe one; &[MemoryJournal]{} is the explicit choice of
	// none, with which a process started after a crash, on a provider
	// whose listing lags, may create again what its predecessor created
	// just before it died, and answer GetLoadBalancer for a deleted
	// Service with "does not exist" while such an object is there.
	Journal Journal
	// TagKey is the key of the ownership tag "<TagKey>=<Service UID>".
	// Empty means DefaultTagKey.
	TagKey string
	// TeardownWait, when positive, lets one EnsureLoadBalancerDeleted
	// call go on making teardown passes for up to that long, waiting on
	// Reconciler.Clock between them (see the package documentation).
	// Zero means one pass per call, and a wait only once nothing is left
	// but the confirmation of the destructions it sent (a listing the
	// list lag after the one that showed nothing left): at most the list
	// lag and (ListLagListings+1) PollIntervals, and never past one
	// Reconciler.CallTimeout from the call's start. Negative means one
	// pass per call and no wait at all: the confirmation then takes a
	// call of its own, after the service controller's backoff. With a
	// fake clock, nothing but stepping it ends a wait: a test that steps
	// it only between calls sets TeardownWait negative.
	TeardownWait time.Duration
	// Reconciler is the template of every Service's reconciler
	// configuration (timeouts, ListLag, Parallelism, Clock, Rand,
	// Metrics). Engine, Steps, Scope, Tag and Journal are set by the
	// Balancer. Each Service's reconciler is made by the worker that
	// first handles it, so a Rand set here is called from the service
	// controller's workers and must be safe for concurrent use.
	Reconciler lbrecon.Config
}

// Balancer implements k8s.io/cloud-provider's LoadBalancer over an
// lbrecon engine, with one lbrecon reconciler per Service (by UID) and
// load-balancer ID kept across calls and leadership terms (each begins a
// new term itself). It is safe for concurrent use.
type Balancer struct {
	cfg    Config
	engine lbrecon.Engine // guarded

	mu      sync.Mutex
	entries map[types.UID]*entry
	term    uint64 // the token of the current term
	begun   bool   // term is set
}

var _ cloudprovider.LoadBalancer = (*Balancer)(nil)

// entry is one Service's load balancers.
type entry struct {
	mu  sync.Mutex // held by the call in progress (TryLock: never waited for)
	svc string     // namespace/name, for errors
	// cur reconciles the load balancer the Service wants (ID id); nil
	// before the first EnsureLoadBalancer or UpdateLoadBalancer, and once
	// the Service wants none.
	cur *lbrecon.LoadBalancerReconciler
	id  string
	// old tears down the load balancers the Service left (by ID): those
	// of this process, with their memory of creations not yet confirmed,
	// and those its journal names, with their intents.
	old map[string]*lbrecon.LoadBalancerReconciler
	// rest tears down what else carries the Service's tag on an ID other
	// than restKeep (left before a restart, by an operator, ...).
	rest     *lbrecon.Leftovers
	restKeep string
	restTerm uint64 // the token of the term rest was made in
	scoped   bool   // the journal's scopes were read into old, in term
	swept    bool   // nothing of the Service left on another ID than id, as seen in term
	active   bool   // a pass ran since the last converged teardown
	term     uint64 // the token of the term scoped and swept were learnt in
}

// New validates cfg and returns a Balancer.
func New(cfg Config) (*Balancer, error) {
	switch {
	case cfg.Engine == nil:
		return nil, fmt.Errorf("%w: ccm: Engine is nil", lbrecon.ErrInvalidConfig)
	case cfg.Mapping == nil:
		return nil, fmt.Errorf("%w: ccm: Mapping is nil", lbrecon.ErrInvalidConfig)
	case cfg.Token == nil:
		return nil, fmt.Errorf("%w: ccm: Token is nil", lbrecon.ErrInvalidConfig)
	case cfg.Journal == nil:
		return nil, fmt.Errorf("%w: ccm: Journal is nil: use NewConfigMapJournal, or &MemoryJournal{} to accept duplicates and leaks after a crash on a lagging provider",
			lbrecon.ErrInvalidConfig)
	}
	if cfg.TagKey == "" {
		cfg.TagKey = DefaultTagKey
	}
	if cfg.Admit == nil {
		cfg.Admit = lbrecon.NewFence("ccm.Balancer in memory", 0, "restart the cloud-controller-manager").Admit
	}
	return &Balancer{cfg: cfg, engine: lbrecon.Guard(cfg.Engine, lbrecon.CheckToken(cfg.Admit)),
		entries: make(map[types.UID]*entry)}, nil
}

// GetLoadBalancerName implements cloudprovider.LoadBalancer: the name
// cloudprovider.DefaultLoadBalancerName gives.
func (b *Balancer) GetLoadBalancerName(_ context.Context, _ string, svc *v1.Service) string {
	return cloudprovider.DefaultLoadBalancerName(svc)
}

// EnsureLoadBalancer implements cloudprovider.LoadBalancer: one
// ReconcileOnce pass of the Service's reconciler towards the load
// balancer the mapping describes. It returns the status once a listing
// confirms the load balancer, a cloud-provider RetryError (with the
// pass's RequeueAfter) while it is not, and an error naming the Service,
// the load balancer, the objects and the verbs that failed otherwise. A
// Service the mapping refuses (see [ServicePorts]) is an error naming the
// field, never a RetryError.
func (b *Balancer) EnsureLoadBalancer(ctx context.Context, clusterName string, svc *v1.Service, nodes []*v1.Node) (*v1.LoadBalancerStatus, error) {
	lb, err := b.cfg.Mapping.LoadBalancer(ctx, clusterName, svc, nodes)
	if err != nil {
		return nil, b.errorf(svc, "map the service to a load balancer: %w", err)
	}
	assigned, err := b.reconcile(ctx, svc, lb, "ensure")
	if err != nil {
		return nil, err
	}
	if lb.Provision {
		if !assigned.Known() { // a converged plan waited for it: a provider that took it back
			return nil, api.NewRetryError(fmt.Sprintf("ccm: service %s/%s: load balancer %s: the provider has not assigned an address yet",
				svc.Namespace, svc.Name, lb.ID), busyRetry)
		}
		if lb.Listening == lbrecon.ListenPorts {
			lb.Addresses = nil // listeners listen on the load balancer's address alone
		}
		if a := assigned.Address; a.IsValid() && !slices.Contains(lb.Addresses, a) {
			lb.Addresses = append(slices.Clone(lb.Addresses), a)
		}
	}
	st, err := b.cfg.Mapping.Status(ctx, svc, lb, boundOf(lb))
	if err != nil {
		return nil, b.errorf(svc, "status of load balancer %s: %w", lb.ID, err)
	}
	if lb.Provision {
		st = withHostname(st, assigned)
	}
	return st, nil
}

// withHostname adds the DNS name the provider assigned to st: on the
// ingress of the assigned address, or as an ingress of its own when st
// has none (a provider that assigns a DNS name only, as ELB does).
func withHostname(st *v1.LoadBalancerStatus, assigned lbrecon.LoadBalancerStatus) *v1.LoadBalancerStatus {
	if assigned.Hostname == "" {
		return st
	}
	if st == nil {
		st = &v1.LoadBalancerStatus{}
	}
	for i, in := range st.Ingress {
		if in.Hostname == assigned.Hostname {
			return st
		}
		if assigned.Address.IsValid() && in.IP == assigned.Address.String() && in.Hostname == "" {
			st.Ingress[i].Hostname = assigned.Hostname
			return st
		}
	}
	st.Ingress = append(st.Ingress, v1.LoadBalancerIngress{Hostname: assigned.Hostname})
	return st
}

// UpdateLoadBalancer implements cloudprovider.LoadBalancer: the same pass
// as EnsureLoadBalancer, for the node list the service controller's node
// sync gives. A pass that failed part-way returns that failure, whatever a
// later GetLoadBalancer shows.
func (b *Balancer) UpdateLoadBalancer(ctx context.Context, clusterName string, svc *v1.Service, nodes []*v1.Node) error {
	lb, err := b.cfg.Mapping.LoadBalancer(ctx, clusterName, svc, nodes)
	if err != nil {
		return b.errorf(svc, "map the service to a load balancer: %w", err)
	}
	_, err = b.reconcile(ctx, svc, lb, "update")
	return err
}

// reconcile makes one pass towards lb and, once converged, one teardown
// pass of every other load balancer of the Service until none is left.
// The new load balancer converged is success, whatever the old ones do:
// they are torn down on the Service's later calls.
func (b *Balancer) reconcile(ctx context.Context, svc *v1.Service, lb lbrecon.LoadBalancer, verb string) (lbrecon.LoadBalancerStatus, error) {
	ctx, err := b.fenced(ctx, svc)
	if err != nil {
		return lbrecon.LoadBalancerStatus{}, err
	}
	e, err := b.entry(svc)
	if err != nil {
		return lbrecon.LoadBalancerStatus{}, err
	}
	if !e.mu.TryLock() {
		return lbrecon.LoadBalancerStatus{}, api.NewRetryError(fmt.Sprintf("ccm: service %s: another call is changing its load balancer", e.svc), busyRetry)
	}
	defer e.mu.Unlock()
	e.enter(ctx)
	if err := b.want(svc, e, lb); err != nil {
		return lbrecon.LoadBalancerStatus{}, err
	}
	e.active = true
	res, err := e.cur.ReconcileOnce(ctx)
	if err != nil {
		return lbrecon.LoadBalancerStatus{}, b.errorf(svc, "%s load balancer %s: %w", verb, lb.ID, err)
	}
	if !res.Converged {
		return lbrecon.LoadBalancerStatus{}, retry(e, verb, lb.ID, res)
	}
	assigned, _, _ := e.cur.Assigned()
	if e.swept {
		return assigned, nil
	}
	done, err := b.teardownOthers(ctx, svc, e, lb.ID, nil)
	if err != nil {
		logr.FromContextOrDiscard(ctx).Error(err, "tearing down the service's other load balancers; retrying on its next call",
			"service", e.svc, "loadBalancer", lb.ID)
	}
	e.swept = done
	return assigned, nil
}

// enter brings e into the term of ctx's token: what e learnt from the
// journal and the listings of an earlier term (the load-balancer IDs the
// journal names, that nothing is left on another ID) is learnt again, as
// another leader's term may have changed it. Its reconcilers begin the
// term themselves (lbrecon.Config.Admit). Called with e.mu held.
func (e *entry) enter(ctx context.Context) {
	token, _ := lbrecon.TokenFrom(ctx)
	if token != e.term {
		e.term, e.scoped, e.swept = token, false, false
	}
}

// want makes e.cur the reconciler of lb: the one of lb's ID when e has
// one (in cur or old), a new one otherwise; a reconciler of another ID
// moves to old, to be torn down. Called with e.mu held.
func (b *Balancer) want(svc *v1.Service, e *entry, lb lbrecon.LoadBalancer) error {
	if e.cur != nil && e.id != lb.ID {
		e.old[e.id] = e.cur
		e.cur, e.swept = nil, false
	}
	if e.cur == nil {
		if r, ok := e.old[lb.ID]; ok {
			delete(e.old, lb.ID)
			e.cur, e.id = r, lb.ID
		} else {
			r, err := b.newReconciler(svc, lb)
			if err != nil {
				return err
			}
			e.cur, e.id = r, lb.ID
		}
	}
	if err := e.cur.SetLoadBalancer(lb); err != nil {
		return b.errorf(svc, "load balancer %s: %w", lb.ID, err)
	}
	return nil
}

// newReconciler returns a reconciler of lb for svc, journaled under lb's
// ID.
func (b *Balancer) newReconciler(svc *v1.Service, lb lbrecon.LoadBalancer) (*lbrecon.LoadBalancerReconciler, error) {
	cfg := b.reconcilerConfig(svc)
	cfg.Journal = b.cfg.Journal.For(svc, lb.ID)
	r, err := lbrecon.NewLoadBalancer(cfg, lb)
	if err != nil {
		return nil, b.errorf(svc, "load balancer %s: %w", lb.ID, err)
	}
	return r, nil
}

// teardownOthers makes teardown passes (see passes; one each with a nil
// pace) of every load balancer of the Service but keep ("" for none): the
// reconcilers in e.old, including one per ID the journal holds intents
// for (read once per entry), then whatever else carries the Service's
// tag. It reports whether all converged; a converged one leaves e.old.
// Called with e.mu held.
func (b *Balancer) teardownOthers(ctx context.Context, svc *v1.Service, e *entry, keep string, pace *pace) (bool, error) {
	e.enter(ctx)
	if !e.scoped {
		scopes, err := b.cfg.Journal.Scopes(ctx, svc)
		if err != nil {
			return false, b.errorf(svc, "read the intent journal: %w", err)
		}
		for id := range scopes {
			if _, ok := e.old[id]; ok || (e.cur != nil && id == e.id) || id == "" {
				continue
			}
			r, err := b.newReconciler(svc, lbrecon.LoadBalancer{ID: id, Suffix: string(svc.UID)})
			if err != nil {
				return false, err
			}
			e.old[id] = r
		}
		e.scoped = true
	}
	// The rest's teardown is made now, though it runs only once e.old is
	// empty: its convergence waits for a listing the list lag after its
	// making (a predecessor's late creation may show until then), and
	// that lag runs from the teardown's first call, not from the call
	// that finds e.old gone. A new term makes it again: a leader of the
	// terms in between may have created too.
	if e.rest == nil || e.restKeep != keep || e.restTerm != e.term {
		l, err := lbrecon.NewLeftovers(b.reconcilerConfig(svc), keep)
		if err != nil {
			return false, b.errorf(svc, "load balancers other than %q: %w", keep, err)
		}
		e.rest, e.restKeep, e.restTerm = l, keep, e.term
	}
	ids := make([]string, 0, len(e.old))
	for id := range e.old {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	done := true
	var last lbrecon.Result
	for _, id := range ids { // first, with their memory of creations not confirmed yet
		if id == keep {
			continue
		}
		res, err := b.passes(ctx, pace, e.old[id].TeardownOnce)
		if err != nil {
			return false, b.errorf(svc, "delete load balancer %s: %w", id, err)
		}
		if res.Converged {
			delete(e.old, id)
		} else {
			done, last = false, res
		}
	}
	if !done {
		return false, retry(e, othersVerb(keep), keep, last)
	}
	// Then the rest, once those are gone: both would destroy the same
	// objects.
	res, err := b.passes(ctx, pace, e.rest.TeardownOnce)
	if err != nil {
		return false, b.errorf(svc, "delete load balancers other than %q: %w", keep, err)
	}
	if !res.Converged {
		return false, retry(e, othersVerb(keep), keep, res)
	}
	return true, nil
}

func (b *Balancer) clock() clock.Clock {
	if b.cfg.Reconciler.Clock != nil {
		return b.cfg.Reconciler.Clock
	}
	return clock.RealClock{}
}

// entry returns the Service's entry, made when there is none.
func (b *Balancer) entry(svc *v1.Service) (*entry, error) {
	if svc.UID == "" {
		return nil, b.errorf(svc, "%w: the service has no UID", lbrecon.ErrInvalidConfig)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if e, ok := b.entries[svc.UID]; ok {
		return e, nil
	}
	e := &entry{svc: svc.Namespace + "/" + svc.Name, old: map[string]*lbrecon.LoadBalancerReconciler{}}
	b.entries[svc.UID] = e
	return e, nil
}

// lookup returns the Service's entry, or nil.
func (b *Balancer) lookup(svc *v1.Service) *entry {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.entries[svc.UID]
}

func (b *Balancer) reconcilerConfig(svc *v1.Service) lbrecon.Config {
	cfg := b.cfg.Reconciler
	cfg.Engine = b.engine
	cfg.Tag = b.tag(svc)
	cfg.Journal = nil
	cfg.Admit = b.cfg.Admit
	return cfg
}

// fenced returns ctx carrying the term's fencing token, having begun the
// term (see begin) if the token is new.
func (b *Balancer) fenced(ctx context.Context, svc *v1.Service) (context.Context, error) {
	token, err := b.cfg.Token(ctx)
	if err != nil {
		return nil, b.errorf(svc, "no fencing token for this term: %w", err)
	}
	if err := b.begin(token); err != nil {
		return nil, b.errorf(svc, "raise the fence to this term's token %d: %w", token, err)
	}
	return lbrecon.WithToken(ctx, token), nil
}

// begin starts the term of token when it is not the Balancer's current
// term: it raises the fence to token first, so that every write of an
// earlier term (another replica deposed, still calling) is refused from
// then on, before the call reads the journal or the provider. Each
// Service's entry learns the journal's IDs again at its next call (see
// enter), and each of its reconcilers, kept, begins the term itself: it
// raises the fence (again), then drops what it kept from the earlier term
// and reads the journal again (lbrecon.Config.Admit). A reconciler that
// kept an earlier term's memory would miss what another replica's term
// created in between, as would one that read the journal before the
// fence went up, while the deposed leader could still write: on a
// provider whose listings lag, either creates again (duplicates). A
// refusal (a later term holds the fence) refuses the call.
func (b *Balancer) begin(token uint64) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.begun && token == b.term {
		return nil
	}
	if err := b.cfg.Admit(token); err != nil {
		return err
	}
	b.term, b.begun = token, true
	return nil
}

func (b *Balancer) errorf(svc *v1.Service, format string, a ...any) error {
	return fmt.Errorf("ccm: service %s/%s: "+format, append([]any{svc.Namespace, svc.Name}, a...)...)
}

// othersVerb is what teardownOthers does, for its RetryError: the load
// balancers other than keep, or every one when keep is "".
func othersVerb(keep string) string {
	if keep == "" {
		return "delete"
	}
	return "delete other load balancers of"
}

// retry returns the RetryError of a pass that did not converge, with the
// failures a wait may cure that it met.
func retry(e *entry, verb, id string, res lbrecon.Result) error {
	p := res.Plan
	target := fmt.Sprintf("%s load balancer %q", verb, id)
	if id == "" { // a teardown of every load balancer of the Service
		target = verb + " the service's load balancers"
	}
	msg := fmt.Sprintf("ccm: service %s: %s: not converged yet (%d to create, %d to update, %d to destroy, %d pending, %d unconfirmed, %d blocked); call again after %v",
		e.svc, target, len(p.Create), len(p.Update), len(p.Destroy)+len(p.Deferred), len(p.Pending), len(p.Unconfirmed), p.Blocked, res.RequeueAfter)
	after := res.RequeueAfter
	if after <= 0 {
		after = busyRetry // never "call again at once"
	}
	re := api.NewRetryError(msg, after)
	if res.Transient != nil {
		return &retryError{RetryError: re, cause: res.Transient}
	}
	return re
}

// retryError is a RetryError that carries the failures a wait may cure.
type retryError struct {
	*api.RetryError
	cause error
}

func (e *retryError) Error() string { return e.RetryError.Error() + ": " + e.cause.Error() }

func (e *retryError) Unwrap() []error { return []error{e.RetryError, e.cause} }

// boundOf is the address-to-ports map of a converged lb.
func boundOf(lb lbrecon.LoadBalancer) map[netip.Addr][]uint16 {
	out := make(map[netip.Addr][]uint16, len(lb.Addresses))
	for _, a := range lb.Addresses {
		for _, p := range lb.Ports {
			out[a] = append(out[a], p.ExternalPort)
		}
	}
	return out
}
