package kubestore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	coordclient "k8s.io/client-go/kubernetes/typed/coordination/v1"

	"github.com/reconkit/reconkit/versiongate"
)

// Records kept alive by node Leases: each node's record is a Lease of the
// store's in Namespace naming the node's own heartbeat Lease, which the
// node's heartbeat (nodestatus, or a kubelet) renews. The store never
// writes node Leases. See the package doc.

// DefaultNodeLeaseNamespace is where the kubelet and nodestatus keep node
// Leases.
const DefaultNodeLeaseNamespace = "kube-node-lease"

// NodeLeaseConfig keeps records alive by node Leases (Config.NodeLease).
type NodeLeaseConfig struct {
	// Namespace holds the node Leases; empty means
	// DefaultNodeLeaseNamespace. A record's ID is its node's name, the
	// name of its Lease.
	Namespace string
	// Heartbeat reports the last successful renewal of node's Lease by
	// this process's heartbeat: when the renewing write was sent (on the
	// store's Clock; the server applied it no earlier), the UID of the
	// Lease it renewed, and false if there was none. Required; called
	// from the gate's goroutines, it must not block.
	// nodestatus.NodeController.LeaseRenewal has this signature.
	Heartbeat func(node string) (sentAt time.Time, lease types.UID, ok bool)
}

// nodeMode is a Store's state for records kept alive by node Leases.
type nodeMode struct {
	ns        string
	leases    coordclient.LeaseInterface
	heartbeat func(string) (time.Time, types.UID, bool)
	// claims are the records of other publishers PublishRecord found in
	// its way, with when it first saw each. The Store's mu guards it.
	claims map[string]claim
}

type claim struct {
	uid   types.UID // the record object
	since time.Time
}

func newNodeMode(cfg Config) (*nodeMode, []error) {
	nc := cfg.NodeLease
	if nc == nil {
		return nil, nil
	}
	var errs []error
	ns := nc.Namespace
	if ns == "" {
		ns = DefaultNodeLeaseNamespace
	}
	if msgs := validation.IsDNS1123Label(ns); len(msgs) > 0 {
		errs = append(errs, fmt.Errorf("NodeLease.Namespace %q: %s", ns, strings.Join(msgs, "; ")))
	}
	if nc.Heartbeat == nil {
		errs = append(errs, fmt.Errorf("NodeLease.Heartbeat is nil: records kept alive by node Leases need the node's heartbeat (for example nodestatus.NodeController.LeaseRenewal)"))
	}
	if cfg.Client == nil || len(errs) > 0 {
		return nil, errs
	}
	return &nodeMode{
		ns:        ns,
		leases:    cfg.Client.CoordinationV1().Leases(ns),
		heartbeat: nc.Heartbeat,
		claims:    map[string]claim{},
	}, nil
}

func (s *Store) nodeRef(name string) string { return fmt.Sprintf("Lease %s/%s", s.node.ns, name) }

func (s *Store) wrapNode(verb, name string, err error) error {
	return wrapIn(s.node.ns, verb, s.nodeRef(name), err)
}

func newToken() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // never fails
	return hex.EncodeToString(b[:])
}

// publishOnNodeLease is PublishRecord with records kept alive by node
// Leases: it reads the node Lease named id (GET, linearizable), which must
// be the object the heartbeat renewed last, and creates the record Lease
// <gate>-<id> naming it. A record already there is replaced (deleted,
// conditioned on its UID and resourceVersion) when it names another node
// Lease object (an orphan), when it is this store's own, or when it has
// been unchanged for the node Lease's TTL plus the margin since this store
// first found it (see the package doc); otherwise ErrRecordHeld.
func (s *Store) publishOnNodeLease(ctx context.Context, id string, value []byte) (versiongate.RecordLease, error) {
	n := s.node
	name, err := s.recordName(id)
	if err != nil {
		return versiongate.RecordLease{}, err
	}
	if msgs := validation.IsDNS1123Subdomain(id); len(msgs) > 0 {
		return versiongate.RecordLease{}, fmt.Errorf("versiongate/kubestore: record ID %q is not a node Lease name: %s", id, strings.Join(msgs, "; "))
	}
	// The record lives while the heartbeat renews the node Lease, and
	// creating it renews nothing the reaper judges: the gate's deadline
	// counts from the heartbeat's last send, read before anything else,
	// never from this publish.
	start := s.clock.Now()
	sent, hbLease, ok := n.heartbeat(id)
	if !ok {
		return versiongate.RecordLease{}, fmt.Errorf("versiongate/kubestore: %s has not been renewed by this process's heartbeat yet", s.nodeRef(id))
	}
	cur, err := n.leases.Get(ctx, id, metav1.GetOptions{})
	if apierrors.IsNotFound(err) && !apiMissing(err) {
		return versiongate.RecordLease{}, fmt.Errorf("versiongate/kubestore: %s does not exist: the node's heartbeat creates it", s.nodeRef(id))
	}
	if err != nil {
		return versiongate.RecordLease{}, s.wrapNode("get", id, err)
	}
	if cur.UID != hbLease {
		return versiongate.RecordLease{}, fmt.Errorf("versiongate/kubestore: %s is object %s, not %s that the heartbeat renewed last: waiting for its next renewal", s.nodeRef(id), cur.UID, hbLease)
	}
	ttl := leaseTTL(cur)
	left := ttl - start.Sub(sent)
	if left <= 0 {
		return versiongate.RecordLease{}, fmt.Errorf("versiongate/kubestore: no renewal of %s was sent within its TTL %v (the last one %v ago): waiting for the heartbeat", s.nodeRef(id), ttl, start.Sub(sent))
	}
	secs := leaseSeconds(ttl)
	ref := livenessRef(cur)
	lid := s.pending(id, name)
	rec, rev, err := s.createRecord(ctx, id, name, value, secs, ref, func(in *coordinationv1.Lease) string {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.inTheWay(id, in, ref, ttl, s.clock.Now())
	})
	if err != nil {
		s.drop(lid)
		return versiongate.RecordLease{}, err
	}
	s.settle(lid, rec, rev, func(o *ownedRecord) {
		o.ttl, o.node = ttl, cur.UID
		delete(n.claims, id)
	})
	// Granted is the node Lease's duration, which the reaper adds its
	// margin to: the gate takes its margin from it too.
	return versiongate.RecordLease{ID: id, Lease: lid, TTL: left, Granted: ttl, Revision: rev}, nil
}

// inTheWay says why the record in, found where this store publishes node
// id's record naming ref, keeps it from publishing, or "" if it may be
// replaced. s.mu is held.
func (s *Store) inTheWay(id string, in *coordinationv1.Lease, ref string, ttl time.Duration, now time.Time) string {
	n := s.node
	if other := in.Annotations[AnnotationHeartbeat]; other != ref {
		if ns, name, _, ok := parseRef(other); ok && ns == n.ns && name == id {
			return "" // it names a node Lease object that is gone: an orphan
		}
	}
	for _, o := range s.owned {
		if o.id == id && o.record == in.UID {
			// This store's own record: the gate publishes a node's
			// record again only once it stopped counting on the last
			// one, lost on its own deadline (which this store may not
			// have reached: the heartbeat goes on renewing the node
			// Lease, so the reaper never judges the record dead) or
			// ended. Its lease, if still kept alive, reports
			// ErrRecordLost once the record is replaced.
			o.lost = true
			return ""
		}
	}
	c, ok := n.claims[id]
	if !ok || c.uid != in.UID {
		n.claims[id] = claim{uid: in.UID, since: now}
		return fmt.Sprintf("was published by another process (uid %s); replaced if unchanged for %v", in.UID, ttl+recordMargin(ttl))
	}
	if d := now.Sub(c.since); d < ttl+recordMargin(ttl) {
		return fmt.Sprintf("was published by another process (uid %s), unchanged for %v here; replaced after %v", in.UID, d, ttl+recordMargin(ttl))
	}
	return ""
}

// keepAliveOnNodeLease is KeepAlive with records kept alive by node
// Leases. It sends no request: the record lives while the heartbeat
// renews its node Lease. It reports the TTL left from the heartbeat's
// last send, so that the gate's deadline counts from a send, never from
// an answer. The record is lost (ErrRecordLost) once this store saw it
// deleted or replaced (in a listing, a watch or its own delete), once
// the heartbeat renews another object (the node Lease was deleted and
// created again), or when no renewal was sent within the TTL.
func (s *Store) keepAliveOnNodeLease(ctx context.Context, l versiongate.RecordLease) (time.Duration, error) {
	o, err := s.owner(l)
	if err != nil {
		return 0, err
	}
	sent, lease, ok := s.node.heartbeat(o.id)
	if !ok {
		s.loseRecord(o)
		return 0, fmt.Errorf("%w: the heartbeat has no renewal of %s", versiongate.ErrRecordLost, s.nodeRef(o.id))
	}
	if lease != o.node {
		s.loseRecord(o)
		return 0, fmt.Errorf("%w: the heartbeat renews %s as object %s, not %s that the record names: the Lease was deleted and created again", versiongate.ErrRecordLost, s.nodeRef(o.id), lease, o.node)
	}
	left := o.ttl - s.clock.Since(sent)
	if left <= 0 {
		s.loseRecord(o)
		return 0, fmt.Errorf("%w: no renewal of %s was sent within its TTL %v", versiongate.ErrRecordLost, s.nodeRef(o.id), o.ttl)
	}
	s.repair(ctx, o)
	return left, nil
}
