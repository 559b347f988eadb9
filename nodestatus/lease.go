package nodestatus

import (
	"context"
	"errors"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/utils/ptr"

	"github.com/reconkit/reconkit/backoff"
)

// ErrLeaseUnsupported is reported (to the log) when the API server has no
// coordination.k8s.io/v1 Lease resource; the controller then heartbeats
// through status writes every RenewInterval.
var ErrLeaseUnsupported = errors.New("nodestatus: the API server has no coordination.k8s.io/v1 leases")

type leaseJob struct {
	// last is the last copy from the server (see packLease), nil to GET
	// first. The worker owns it until it reports back, and may reuse its
	// storage for the result.
	last  []byte
	owner types.UID // the Node's UID for the owner reference
}

type leaseResult struct {
	renewed     bool
	lease       []byte // the renewed lease, packed (nil: read it at the next renewal)
	unsupported bool   // the Lease API is missing: fall back to status heartbeats
	gone        bool   // the lease vanished with its Node: the Node must be registered first
	recreated   bool   // the lease was renewed, but it is a new object
	ownerRead   bool   // its owner reference is the Node as read just now
	failures    int    // attempts that failed before the result
	err         error
	// sent is when the write that renewed the lease was sent, and uid the
	// lease it renewed: see LeaseRenewal.
	sent time.Time
	uid  types.UID
}

// renewLease renews (or creates) the node's lease, retrying with backoff.
// Only a missing Lease API, a lease deleted under us, ctx, or the error
// handler end the retries early.
func (c *NodeController) renewLease(ctx context.Context, job leaseJob) leaseResult {
	leases := c.cfg.LeaseClient.CoordinationV1().Leases(c.cfg.LeaseNamespace)
	var res leaseResult
	last := unpackLease(job.last) // decoded here: deep decoding would grow the loop's stack
	cur := last
	var renewed *coordinationv1.Lease
	read := false   // the attempt read the lease itself
	absent := false // the last attempt found the lease missing and could not create it
	recreate := func(ctx, rctx context.Context) error {
		err := c.recreateLease(ctx, rctx, &res, &cur, &renewed)
		absent = err != nil && apierrors.IsNotFound(err) && !res.gone
		return err
	}
	attempt := func(ctx context.Context) error {
		rctx, cancel := context.WithTimeout(ctx, c.cfg.RequestTimeout)
		defer cancel()
		read = cur == nil
		if cur == nil && absent {
			// Known missing since the last attempt: create it again
			// without reading it first.
			return recreate(ctx, rctx)
		}
		if cur == nil {
			start := c.clk.Now()
			l, err := leases.Get(rctx, c.name, metav1.GetOptions{})
			err = c.observe(ctx, CallGetLease, start, err)
			switch {
			case err == nil:
				cur = l
			case apierrors.IsNotFound(err) && !isStop(err):
				if c.leaseAPIMissing(rctx, err) {
					res.unsupported = true
					return permanent(ErrLeaseUnsupported)
				}
				if last != nil {
					// We had one: it vanished.
					return recreate(ctx, rctx)
				}
				start := c.clk.Now()
				l, err := leases.Create(rctx, c.newLease(nil, job.owner), metav1.CreateOptions{FieldManager: c.cfg.FieldManager})
				err = c.observe(ctx, CallCreateLease, start, err)
				if err != nil {
					if apierrors.IsNotFound(err) && c.leaseAPIMissing(rctx, err) {
						res.unsupported = true
						return permanent(ErrLeaseUnsupported)
					}
					return fmt.Errorf("create lease: %w", err)
				}
				cur, renewed, res.sent = l, l, start
				return nil
			default:
				return fmt.Errorf("get lease: %w", err)
			}
		}
		start := c.clk.Now()
		l, err := leases.Update(rctx, c.newLease(cur, job.owner), metav1.UpdateOptions{FieldManager: c.cfg.FieldManager})
		err = c.observe(ctx, CallUpdateLease, start, err)
		switch {
		case err == nil:
			cur, renewed, res.sent = l, l, start
			return nil
		case apierrors.IsConflict(err):
			cur = nil
			return fmt.Errorf("update lease: stale copy: %w", err)
		case apierrors.IsNotFound(err) && !isStop(err):
			if c.leaseAPIMissing(rctx, err) {
				res.unsupported = true
				return permanent(ErrLeaseUnsupported)
			}
			// Deleted by the garbage collector with its Node, or by an
			// administrator: recreated here, never behind a status job.
			return recreate(ctx, rctx)
		}
		return fmt.Errorf("update lease: %w", err)
	}
	err := c.retry(ctx, retryLease, func(ctx context.Context) error {
		err := attempt(ctx)
		if err != nil && cur == nil && !read && !backoff.IsPermanent(err) && (apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err)) {
			// Read the lease again at once, unless this attempt read
			// it itself: a conflict with the server's newest copy is
			// not cured by reading it again, and only the backoff
			// bounds what it costs.
			res.failures++
			err = attempt(ctx)
		}
		if err != nil && !backoff.IsPermanent(err) {
			res.failures++
		}
		return err
	})
	if renewed != nil {
		res.uid = renewed.UID
		res.renewed, res.lease = true, packLease(job.last, renewed)
	}
	if last != nil && renewed != nil && renewed.UID != last.UID {
		// The lease was deleted and created again (an update may create a
		// lease): most likely the garbage collector removed it with its
		// Node. Let the loop check the Node.
		res.recreated = true
	}
	if err != nil && ctx.Err() == nil && !res.unsupported && !res.gone {
		res.err = err
	}
	return res
}

// recreateLease creates the node's lease again after it vanished. The
// garbage collector deletes a lease with its Node, so the Node is read
// first (linearizably, through the lease client: renewals never wait for
// the Limiter or for status traffic) and the new lease is owned by the
// Node as it is now. A Node that is gone too is the status job's business
// (res.gone): it registers it again, or stops Run.
func (c *NodeController) recreateLease(ctx, rctx context.Context, res *leaseResult, cur, renewed **coordinationv1.Lease) error {
	start := c.clk.Now()
	n, err := c.cfg.LeaseClient.CoreV1().Nodes().Get(rctx, c.name, metav1.GetOptions{})
	err = c.observe(ctx, CallGetNode, start, err)
	switch {
	case apierrors.IsNotFound(err) && !isStop(err):
		res.gone = true
		return permanent(fmt.Errorf("lease and node are gone: %w", err))
	case err != nil:
		return fmt.Errorf("get node for its lease: %w", err)
	}
	start = c.clk.Now()
	l, err := c.cfg.LeaseClient.CoordinationV1().Leases(c.cfg.LeaseNamespace).Create(rctx, c.newLease(nil, n.UID), metav1.CreateOptions{FieldManager: c.cfg.FieldManager})
	err = c.observe(ctx, CallCreateLease, start, err)
	if err != nil {
		// A conflict or AlreadyExists reads the lease again at once.
		*cur = nil
		return fmt.Errorf("create lease again: %w", err)
	}
	*cur, *renewed, res.sent = l, l, start
	res.ownerRead = true
	return nil
}

// newLease returns base (or a new lease) renewed now, with the node as its holder,
// owned by the Node with the given UID. Owner references to other objects
// are kept.
func (c *NodeController) newLease(base *coordinationv1.Lease, owner types.UID) *coordinationv1.Lease {
	var l *coordinationv1.Lease
	if base == nil {
		l = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: c.name, Namespace: c.cfg.LeaseNamespace}}
	} else {
		l = base.DeepCopy()
	}
	l.Spec.HolderIdentity = ptr.To(c.name)
	l.Spec.LeaseDurationSeconds = ptr.To(int32(c.cfg.LeaseDuration.Seconds()))
	l.Spec.RenewTime = &metav1.MicroTime{Time: c.clk.Now()}
	if owner != "" {
		refs := l.OwnerReferences[:0:0]
		for _, r := range l.OwnerReferences {
			if r.APIVersion == "v1" && r.Kind == "Node" {
				continue
			}
			refs = append(refs, r)
		}
		l.OwnerReferences = append(refs, metav1.OwnerReference{
			APIVersion: corev1.SchemeGroupVersion.String(),
			Kind:       "Node",
			Name:       c.name,
			UID:        owner,
		})
	}
	return l
}

// leaseAPIMissing tells a 404 for the lease resource itself from a 404 for
// one lease or its namespace: the API server names the missing object in
// the error's details. An unnamed 404 is confirmed through discovery,
// within ctx (the renewal's RequestTimeout).
func (c *NodeController) leaseAPIMissing(ctx context.Context, err error) bool {
	var se apierrors.APIStatus
	if errors.As(err, &se) {
		if d := se.Status().Details; d != nil && d.Name != "" {
			return false
		}
	}
	list, derr := discovery.ToDiscoveryInterfaceWithContext(c.cfg.LeaseClient.Discovery()).
		ServerResourcesForGroupVersionWithContext(ctx, coordinationv1.SchemeGroupVersion.String())
	if derr != nil {
		return apierrors.IsNotFound(derr)
	}
	for _, r := range list.APIResources {
		if r.Name == "leases" {
			return false
		}
	}
	return true
}
