package ccm

import (
	"context"

	v1 "k8s.io/api/core/v1"
	"k8s.io/cloud-provider/api"

	"github.com/reconkit/reconkit/lbrecon"
)

// GetLoadBalancer implements cloudprovider.LoadBalancer from the Service's
// identity alone (its UID, namespace and name), never from its spec: after
// a change to type ClusterIP (node ports dropped), for a mixed-protocol
// Service, or without node ports, it answers as for any other. The load
// balancer exists while the Service may own anything at the provider: a
// call of this process in progress or a pass not yet torn down, an object
// any listing by its tag shows (on any load-balancer ID), or an intent in
// the journal (a creation no listing may show yet, also a predecessor's).
// So the service controller neither skips EnsureLoadBalancerDeleted nor
// drops an UpdateLoadBalancer error while something may be left. The
// status is the Service's own (the controller ignores it). It makes no
// write: one List at the provider, within Reconciler.CallTimeout, and one
// LIST of the journal when the provider lists nothing.
func (b *Balancer) GetLoadBalancer(ctx context.Context, _ string, svc *v1.Service) (*v1.LoadBalancerStatus, bool, error) {
	if svc.UID == "" {
		return nil, false, b.errorf(svc, "%w: the service has no UID", lbrecon.ErrInvalidConfig)
	}
	status := svc.Status.LoadBalancer.DeepCopy()
	e := b.lookup(svc)
	if e != nil {
		if !e.mu.TryLock() {
			return status, true, nil // a call is changing it: it exists
		}
		active := e.active
		e.mu.Unlock()
		if active {
			return status, true, nil
		}
	}
	n, err := b.owned(ctx, svc)
	if err != nil {
		return nil, false, b.errorf(svc, "list its load balancers: %w", err)
	}
	if n > 0 {
		return status, true, nil
	}
	scopes, err := b.cfg.Journal.Scopes(ctx, svc)
	if err != nil {
		return nil, false, b.errorf(svc, "read the intent journal: %w", err)
	}
	if len(scopes) > 0 {
		return status, true, nil
	}
	if e != nil && e.mu.TryLock() {
		if !e.active {
			b.drop(svc, e) // keep no entry for a Service without a load balancer
		}
		e.mu.Unlock()
	}
	return nil, false, nil
}

// owned returns how many objects the provider lists with the Service's
// tag, on any load-balancer ID: one List, within Reconciler.CallTimeout.
func (b *Balancer) owned(ctx context.Context, svc *v1.Service) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, b.callTimeout())
	defer cancel()
	tag := b.tag(svc)
	objs, err := b.cfg.Engine.List(ctx, lbrecon.Query{Tag: tag})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, o := range objs {
		if o.HasTag(tag) {
			n++
		}
	}
	return n, nil
}

// EnsureLoadBalancerDeleted implements cloudprovider.LoadBalancer from the
// Service's identity alone, never from its spec (see GetLoadBalancer). It
// tears down every load balancer of the Service: each ID this process
// reconciled (with its memory of creations no listing confirmed yet),
// each ID the journal holds intents for (holding them until a listing
// shows their objects or the provider's lag proves them absent), then
// whatever else carries the Service's tag. Only objects carrying the tag
// are destroyed, children before parents. By default it makes one pass
// and returns nil once the teardown converged, a RetryError ("call again
// after D") until then; when the pass finds nothing left but the
// confirmation of destructions already sent, it waits for that on the
// clock within the call (at most the list lag and a poll, within one
// Reconciler.CallTimeout of its start) rather than return. With a
// positive Config.TeardownWait it goes on making passes within that
// time; with a negative one it never waits. A later call finds nothing
// and returns nil.
func (b *Balancer) EnsureLoadBalancerDeleted(ctx context.Context, _ string, svc *v1.Service) error {
	ctx, err := b.fenced(ctx, svc)
	if err != nil {
		return err
	}
	e, err := b.entry(svc)
	if err != nil {
		return err
	}
	if !e.mu.TryLock() {
		return api.NewRetryError("ccm: service "+e.svc+": another call is changing its load balancer", busyRetry)
	}
	defer e.mu.Unlock()
	e.active = true
	if e.cur != nil {
		e.old[e.id] = e.cur
		e.cur, e.id, e.swept = nil, "", false
	}
	if _, err := b.teardownOthers(ctx, svc, e, "", b.deletePace(b.clock().Now())); err != nil {
		return err
	}
	e.active = false
	b.drop(svc, e)
	return nil
}

// drop forgets e, unless another entry replaced it.
func (b *Balancer) drop(svc *v1.Service, e *entry) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.entries[svc.UID] == e {
		delete(b.entries, svc.UID)
	}
}

// tag is the Service's ownership tag.
func (b *Balancer) tag(svc *v1.Service) string { return b.cfg.TagKey + "=" + string(svc.UID) }
