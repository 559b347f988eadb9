package ccm

import (
	"context"
	"fmt"
	"net/netip"
	"sync"
	"time"

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
	// Mapping turns Services and nodes into load balancers. Required.
	Mapping Mapping
	// Token returns the fencing token of the leader term the
	// cloud-controller-manager runs in (election.Leadership's Token, or
	// the term's lease generation). An error refuses every write of the
	// call, which returns it. Required.
	Token func(ctx context.Context) (uint64, error)
	// Admit is the fence the token is checked against before every write
	// (see lbrecon.CheckToken). Nil means an lbrecon.Fence in memory,
	// which refuses a term older than the newest this Balancer saw.
	Admit func(token uint64) error
	// Journal returns the intent journal of a Service's reconciler, such
	// as [NewServiceJournal] on the Service's annotations. Nil keeps
	// intents in memory only: a restarted process may then create again
	// what its predecessor created just before it died, on a provider
	// whose listing lags.
	Journal func(svc *v1.Service) lbrecon.Journal
	// TagKey is the key of the ownership tag "<TagKey>=<Service UID>".
	// Empty means DefaultTagKey.
	TagKey string
	// TeardownWait bounds how long one EnsureLoadBalancerDeleted call may
	// go on making teardown passes, waiting on Reconciler.Clock between
	// them (see the package documentation). Zero means
	// Reconciler.CallTimeout; negative means one pass per call. With a
	// fake clock, nothing but stepping it ends that wait.
	TeardownWait time.Duration
	// Reconciler is the template of every Service's reconciler
	// configuration (timeouts, ListLag, Parallelism, Clock, Metrics).
	// Engine, Steps, Scope, Tag and Journal are set by the Balancer.
	Reconciler lbrecon.Config
}

// Balancer implements k8s.io/cloud-provider's LoadBalancer over an
// lbrecon engine, with one lbrecon reconciler per Service (by UID) kept
// across calls. It is safe for concurrent use.
type Balancer struct {
	cfg    Config
	engine lbrecon.Engine // guarded

	mu      sync.Mutex
	entries map[types.UID]*entry
}

var _ cloudprovider.LoadBalancer = (*Balancer)(nil)

// entry is one Service's load balancer.
type entry struct {
	mu      sync.Mutex // held by the call in progress (TryLock: never waited for)
	svc     string     // namespace/name, for errors
	r       *lbrecon.LoadBalancerReconciler
	id      string
	active  bool // a pass ran since the last converged teardown
	sweep   *lbrecon.Leftovers
	sweepID string // the ID sweep keeps
	swept   bool   // sweep converged: nothing of another ID left
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

// GetLoadBalancer implements cloudprovider.LoadBalancer. It reports that
// the load balancer exists while the Service owns anything at the
// provider: an object a listing shows with its tag, a creation no listing
// confirmed yet (also one a predecessor recorded in the journal), or a
// pass or teardown of this process not yet converged. So the service
// controller neither skips EnsureLoadBalancerDeleted nor drops an
// UpdateLoadBalancer error while something may be left. It makes no
// write.
func (b *Balancer) GetLoadBalancer(ctx context.Context, clusterName string, svc *v1.Service) (*v1.LoadBalancerStatus, bool, error) {
	lb, err := b.cfg.Mapping.LoadBalancer(ctx, clusterName, svc, nil)
	if err != nil {
		return nil, false, b.errorf(svc, "map the service to a load balancer: %w", err)
	}
	e, err := b.entry(svc, lb)
	if err != nil {
		return nil, false, err
	}
	if !e.mu.TryLock() {
		return &v1.LoadBalancerStatus{}, true, nil // a call is changing it: it exists
	}
	defer e.mu.Unlock()
	obs, err := e.r.Observe(ctx)
	if err != nil {
		return nil, false, b.errorf(svc, "get load balancer %s: %w", e.id, err)
	}
	owned := 0
	for _, k := range []string{lbrecon.KindBackend, lbrecon.KindFrontend, lbrecon.KindBind, lbrecon.KindServer} {
		owned += len(obs.Objects(k))
	}
	exists := e.active || owned > 0
	if !exists {
		p, err := e.r.Check(ctx) // loads the journal: a predecessor's creations
		if err != nil {
			return nil, false, b.errorf(svc, "get load balancer %s: %w", e.id, err)
		}
		exists = len(p.Unconfirmed)+len(p.Pending)+len(p.Failed) > 0
	}
	if !exists {
		b.forget(svc, e) // keep no entry for a Service without a load balancer
		return nil, false, nil
	}
	st, err := b.cfg.Mapping.Status(ctx, svc, lb, lbrecon.StatusOf(lb, obs))
	if err != nil {
		return nil, false, b.errorf(svc, "status of load balancer %s: %w", e.id, err)
	}
	return st, true, nil
}

// EnsureLoadBalancer implements cloudprovider.LoadBalancer: one
// ReconcileOnce pass of the Service's reconciler towards the load
// balancer the mapping describes. It returns the status once a listing
// confirms the load balancer, a cloud-provider RetryError (with the
// pass's RequeueAfter) while it is not, and an error naming the Service,
// the load balancer, the objects and the verbs that failed otherwise.
func (b *Balancer) EnsureLoadBalancer(ctx context.Context, clusterName string, svc *v1.Service, nodes []*v1.Node) (*v1.LoadBalancerStatus, error) {
	lb, err := b.cfg.Mapping.LoadBalancer(ctx, clusterName, svc, nodes)
	if err != nil {
		return nil, b.errorf(svc, "map the service to a load balancer: %w", err)
	}
	if err := b.reconcile(ctx, svc, lb, "ensure"); err != nil {
		return nil, err
	}
	st, err := b.cfg.Mapping.Status(ctx, svc, lb, boundOf(lb))
	if err != nil {
		return nil, b.errorf(svc, "status of load balancer %s: %w", lb.ID, err)
	}
	return st, nil
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
	return b.reconcile(ctx, svc, lb, "update")
}

// EnsureLoadBalancerDeleted implements cloudprovider.LoadBalancer:
// TeardownOnce passes of the Service's load balancer, then of the load
// balancers of any other ID the Service's tag is found on, for up to
// Config.TeardownWait while the teardown only waits for the provider
// (see the package documentation). Only objects
// carrying the Service's tag are destroyed, children before parents; it
// returns nil once a listing shows none left, a RetryError until then. A
// later call finds nothing and returns nil.
func (b *Balancer) EnsureLoadBalancerDeleted(ctx context.Context, clusterName string, svc *v1.Service) error {
	lb, err := b.cfg.Mapping.LoadBalancer(ctx, clusterName, svc, nil)
	if err != nil {
		return b.errorf(svc, "map the service to a load balancer: %w", err)
	}
	ctx, err = b.fenced(ctx, svc)
	if err != nil {
		return err
	}
	e, err := b.entry(svc, lb)
	if err != nil {
		return err
	}
	if !e.mu.TryLock() {
		return api.NewRetryError(fmt.Sprintf("ccm: service %s: another call is changing load balancer %s", e.svc, e.id), busyRetry)
	}
	defer e.mu.Unlock()
	e.active = true
	var deadline time.Time // one pass
	if wait := b.teardownWait(); wait > 0 {
		deadline = b.clock().Now().Add(wait)
	}
	res, err := b.passes(ctx, deadline, e.r.TeardownOnce)
	if err != nil {
		return b.errorf(svc, "delete load balancer %s: %w", e.id, err)
	}
	if !res.Converged {
		return retry(e, "delete", res)
	}
	if err := b.sweep(ctx, svc, e, "", deadline); err != nil {
		return err
	}
	e.active = false
	b.forget(svc, e)
	return nil
}

// forget drops e, unless another entry replaced it.
func (b *Balancer) forget(svc *v1.Service, e *entry) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.entries[svc.UID] == e {
		delete(b.entries, svc.UID)
	}
}

// reconcile makes one pass towards lb and, once converged, one teardown
// pass of the Service's load balancers with other IDs.
func (b *Balancer) reconcile(ctx context.Context, svc *v1.Service, lb lbrecon.LoadBalancer, verb string) error {
	ctx, err := b.fenced(ctx, svc)
	if err != nil {
		return err
	}
	e, err := b.entry(svc, lb)
	if err != nil {
		return err
	}
	if !e.mu.TryLock() {
		return api.NewRetryError(fmt.Sprintf("ccm: service %s: another call is changing load balancer %s", e.svc, e.id), busyRetry)
	}
	defer e.mu.Unlock()
	if err := e.r.SetLoadBalancer(lb); err != nil {
		return b.errorf(svc, "%s load balancer %s: %w", verb, lb.ID, err)
	}
	e.active = true
	res, err := e.r.ReconcileOnce(ctx)
	if err != nil {
		return b.errorf(svc, "%s load balancer %s: %w", verb, lb.ID, err)
	}
	if !res.Converged {
		return retry(e, verb, res)
	}
	return b.sweep(ctx, svc, e, e.id, time.Time{})
}

// sweep makes teardown passes (see passes) of the load
// balancers other than keep that carry the Service's tag: left by an ID
// change, in this process or before a restart. Called with e.mu held.
func (b *Balancer) sweep(ctx context.Context, svc *v1.Service, e *entry, keep string, deadline time.Time) error {
	if e.swept && e.sweepID == keep {
		return nil
	}
	if e.sweep == nil || e.sweepID != keep {
		l, err := lbrecon.NewLeftovers(b.reconcilerConfig(svc), keep)
		if err != nil {
			return b.errorf(svc, "load balancers other than %q: %w", keep, err)
		}
		e.sweep, e.sweepID = l, keep
	}
	res, err := b.passes(ctx, deadline, e.sweep.TeardownOnce)
	if err != nil {
		return b.errorf(svc, "delete load balancers other than %q: %w", keep, err)
	}
	if !res.Converged {
		return retry(e, "delete other load balancers of", res)
	}
	e.swept = true
	return nil
}

// passes makes one teardown pass, then more while the teardown is only
// waiting for the provider and the wait fits before deadline: the pass met
// no failure a wait may cure, it has objects to destroy or deletions to
// see, and waiting its RequeueAfter, then running as long as it did, ends
// before deadline. It waits on the clock between passes only, and starts
// none after deadline; a zero deadline makes one pass.
//
// The service controller wraps EnsureLoadBalancerDeleted's error with %v,
// so it backs a RetryError off exponentially (5 s, 10 s, 20 s, ...): a
// teardown that needs several passes (children, then parents, each once a
// listing shows their children gone) costs far less time done here.
func (b *Balancer) passes(ctx context.Context, deadline time.Time, once func(context.Context) (lbrecon.Result, error)) (lbrecon.Result, error) {
	clk := b.clock()
	for {
		start := clk.Now()
		res, err := once(ctx)
		if err != nil || res.Converged || res.Transient != nil || deadline.IsZero() {
			return res, err
		}
		p := res.Plan
		if len(p.Destroy)+len(p.Deferred)+len(p.Pending)+len(p.Unconfirmed) == 0 {
			return res, nil // failed objects, nothing a wait here cures
		}
		took := clk.Since(start)
		if clk.Now().Add(res.RequeueAfter + took).After(deadline) {
			return res, nil
		}
		t := clk.NewTimer(res.RequeueAfter)
		select {
		case <-ctx.Done():
			t.Stop()
			return res, nil // the RetryError of the last pass
		case <-t.C():
		}
	}
}

func (b *Balancer) clock() clock.Clock {
	if b.cfg.Reconciler.Clock != nil {
		return b.cfg.Reconciler.Clock
	}
	return clock.RealClock{}
}

func (b *Balancer) teardownWait() time.Duration {
	switch {
	case b.cfg.TeardownWait != 0:
		return b.cfg.TeardownWait
	case b.cfg.Reconciler.CallTimeout > 0:
		return b.cfg.Reconciler.CallTimeout
	}
	return lbrecon.DefaultCallTimeout
}

// entry returns the Service's entry, made for lb's ID when there is none;
// a Service whose load balancer ID changed gets a new reconciler (the old
// load balancer is swept once the new one converged).
func (b *Balancer) entry(svc *v1.Service, lb lbrecon.LoadBalancer) (*entry, error) {
	if svc.UID == "" {
		return nil, b.errorf(svc, "%w: the service has no UID", lbrecon.ErrInvalidConfig)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if e, ok := b.entries[svc.UID]; ok && e.id == lb.ID {
		return e, nil
	}
	cfg := b.reconcilerConfig(svc)
	if b.cfg.Journal != nil {
		cfg.Journal = b.cfg.Journal(svc)
	}
	r, err := lbrecon.NewLoadBalancer(cfg, lb)
	if err != nil {
		return nil, b.errorf(svc, "load balancer %s: %w", lb.ID, err)
	}
	e := &entry{svc: svc.Namespace + "/" + svc.Name, r: r, id: lb.ID}
	b.entries[svc.UID] = e
	return e, nil
}

func (b *Balancer) reconcilerConfig(svc *v1.Service) lbrecon.Config {
	cfg := b.cfg.Reconciler
	cfg.Engine = b.engine
	cfg.Tag = b.cfg.TagKey + "=" + string(svc.UID)
	cfg.Journal = nil
	return cfg
}

// fenced returns ctx carrying the term's fencing token.
func (b *Balancer) fenced(ctx context.Context, svc *v1.Service) (context.Context, error) {
	token, err := b.cfg.Token(ctx)
	if err != nil {
		return nil, b.errorf(svc, "no fencing token for this term: %w", err)
	}
	return lbrecon.WithToken(ctx, token), nil
}

func (b *Balancer) errorf(svc *v1.Service, format string, a ...any) error {
	return fmt.Errorf("ccm: service %s/%s: "+format, append([]any{svc.Namespace, svc.Name}, a...)...)
}

// retry returns the RetryError of a pass that did not converge, with the
// failures a wait may cure that it met.
func retry(e *entry, verb string, res lbrecon.Result) error {
	p := res.Plan
	msg := fmt.Sprintf("ccm: service %s: %s load balancer %s: not converged yet (%d to create, %d to update, %d to destroy, %d pending, %d unconfirmed, %d blocked); retrying in %v",
		e.svc, verb, e.id, len(p.Create), len(p.Update), len(p.Destroy)+len(p.Deferred), len(p.Pending), len(p.Unconfirmed), p.Blocked, res.RequeueAfter)
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
