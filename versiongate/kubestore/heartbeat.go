package kubestore

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	coordclient "k8s.io/client-go/kubernetes/typed/coordination/v1"

	"github.com/reconkit/reconkit/versiongate"
)

// Records on node Leases: each node's record is a label and an annotation
// of the gate on the node's own heartbeat Lease, which the node's
// heartbeat (nodestatus, or a kubelet) renews. See the package doc.

// NodeLeaseKeyPrefix prefixes the label and annotation key of a gate's
// records on node Leases: the key is NodeLeaseKeyPrefix + the gate's
// name. The label holds the publisher's token (new at every publish), the
// annotation the record's value (base64).
const NodeLeaseKeyPrefix = "versiongate.reconkit.io/"

// DefaultNodeLeaseNamespace is where the kubelet and nodestatus keep node
// Leases.
const DefaultNodeLeaseNamespace = "kube-node-lease"

// NodeLeaseConfig keeps records on node Leases (Config.NodeLease).
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

// nodeMode is a Store's state for records on node Leases.
type nodeMode struct {
	ns        string
	leases    coordclient.LeaseInterface
	heartbeat func(string) (time.Time, types.UID, bool)
	key       string // the label and annotation key
	// owned are the records this store published, by RecordLease.Lease;
	// claims the records of other publishers PublishRecord found in its
	// way, with when it first saw each. The Store's mu guards both.
	owned  map[int64]*nodeRecord
	claims map[string]claim
}

// nodeRecord is a record this store published on a node Lease.
type nodeRecord struct {
	id    string
	lease types.UID // the node Lease's object
	token string    // the label's value this store wrote
	// sent is when this store's write of the record was sent: a write
	// renews the Lease for observers as a heartbeat does.
	sent  time.Time
	ttl   time.Duration
	ended bool // deleted, or lost
}

type claim struct {
	uid   types.UID // the record's identity, see recordUID
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
		errs = append(errs, fmt.Errorf("NodeLease.Heartbeat is nil: records on node Leases need the node's heartbeat (for example nodestatus.NodeController.LeaseRenewal)"))
	}
	if cfg.Client == nil || len(errs) > 0 {
		return nil, errs
	}
	return &nodeMode{
		ns:        ns,
		leases:    cfg.Client.CoordinationV1().Leases(ns),
		heartbeat: nc.Heartbeat,
		key:       NodeLeaseKeyPrefix + cfg.Gate,
		owned:     map[int64]*nodeRecord{},
		claims:    map[string]claim{},
	}, nil
}

// recordLeases is the client of the Leases that hold records.
func (s *Store) recordLeases() coordclient.LeaseInterface {
	if s.node != nil {
		return s.node.leases
	}
	return s.leases
}

// recordUID is a record's identity: its Lease's UID, and on a node Lease
// also the token of the publish that wrote it, so that every publish is a
// new record for observers (as a new Lease is), and a record published
// again on the same Lease never passes for the one an observer knew.
func (s *Store) recordUID(l *coordinationv1.Lease) types.UID {
	if s.node == nil {
		return l.UID
	}
	return types.UID(string(l.UID) + "/" + l.Labels[s.node.key])
}

func (s *Store) nodeRef(name string) string { return fmt.Sprintf("Lease %s/%s", s.node.ns, name) }

func (s *Store) wrapNode(verb, name string, err error) error {
	return wrapIn(s.node.ns, verb, s.nodeRef(name), err)
}

// recordPatch is a merge patch of the gate's label and annotation (nil
// values remove them) conditioned on resourceVersion rv: a resourceVersion
// names one version of one object, so the server refuses the patch (409)
// once anything wrote the Lease, or it was replaced.
func (s *Store) recordPatch(rv string, token, value *string) []byte {
	type meta struct {
		ResourceVersion string             `json:"resourceVersion"`
		Labels          map[string]*string `json:"labels"`
		Annotations     map[string]*string `json:"annotations"`
	}
	b, _ := json.Marshal(struct {
		Metadata meta `json:"metadata"`
	}{meta{rv, map[string]*string{s.node.key: token}, map[string]*string{s.node.key: value}}})
	return b
}

func newToken() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // never fails
	return hex.EncodeToString(b[:])
}

// publishOnNodeLease is PublishRecord on node Leases: it writes the
// record's label (a new token) and annotation on the Lease named id, in a
// patch conditioned on the resourceVersion just read (linearizably), once
// the heartbeat has renewed that very Lease. A record already there is
// taken over only when it is this store's own record, or when its
// publisher's token has not changed for the Lease's TTL plus the margin
// since this store first found it in its way (see the package doc);
// otherwise ErrRecordHeld.
func (s *Store) publishOnNodeLease(ctx context.Context, id string, value []byte) (versiongate.RecordLease, error) {
	n := s.node
	if msgs := validation.IsDNS1123Subdomain(id); len(msgs) > 0 {
		return versiongate.RecordLease{}, fmt.Errorf("versiongate/kubestore: record ID %q is not a node Lease name: %s", id, strings.Join(msgs, "; "))
	}
	_, hbLease, ok := n.heartbeat(id)
	if !ok {
		return versiongate.RecordLease{}, fmt.Errorf("versiongate/kubestore: %s has not been renewed by this process's heartbeat yet", s.nodeRef(id))
	}
	enc := base64.StdEncoding.EncodeToString(value)
	for {
		if err := ctx.Err(); err != nil {
			return versiongate.RecordLease{}, err
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
		if tok := cur.Labels[n.key]; tok != "" {
			s.mu.Lock()
			why := s.inTheWay(id, s.recordUID(cur), tok, leaseTTL(cur), s.clock.Now())
			s.mu.Unlock()
			if why != "" {
				return versiongate.RecordLease{}, fmt.Errorf("%w: %s holds a record of gate %q %s", versiongate.ErrRecordHeld, s.nodeRef(id), s.gate, why)
			}
		}
		tok := newToken()
		start := s.clock.Now()
		updated, err := n.leases.Patch(ctx, id, types.MergePatchType, s.recordPatch(cur.ResourceVersion, &tok, &enc), metav1.PatchOptions{})
		if apierrors.IsConflict(err) {
			continue // renewed meanwhile: read it again
		}
		if err != nil {
			return versiongate.RecordLease{}, s.wrapNode("patch", id, err)
		}
		rev, err := revision(s.nodeRef(id), updated.ResourceVersion)
		if err != nil {
			return versiongate.RecordLease{}, err
		}
		ttl := leaseTTL(updated)
		s.mu.Lock()
		s.nextLease++
		lid := s.nextLease
		n.owned[lid] = &nodeRecord{id: id, lease: updated.UID, token: tok, sent: start, ttl: ttl}
		delete(n.claims, id)
		s.ages.observe(id, s.recordUID(updated), value, rev, ttl, s.clock.Now())
		s.mu.Unlock()
		return versiongate.RecordLease{ID: id, Lease: lid, TTL: ttl, Revision: rev}, nil
	}
}

// inTheWay says why the record uid (token tok) on node id's Lease keeps
// this store from publishing, or "" if it may be replaced. s.mu is held.
func (s *Store) inTheWay(id string, uid types.UID, tok string, ttl time.Duration, now time.Time) string {
	n := s.node
	for _, o := range n.owned {
		if o.id == id && o.token == tok {
			// This store's own record: the gate publishes a node's
			// record again only once it stopped counting on the last
			// one, lost on its own deadline (which this store may not
			// have reached: the heartbeat goes on renewing the Lease,
			// so no observer ever judges the record dead) or ended.
			// Its lease, if still kept alive, reports ErrRecordLost
			// once the new token is written.
			o.ended = true
			return ""
		}
	}
	c, ok := n.claims[id]
	if !ok || c.uid != uid {
		n.claims[id] = claim{uid: uid, since: now}
		return fmt.Sprintf("published by another process (token %s); replaced if unchanged for %v", tok, ttl+recordMargin(ttl))
	}
	if d := now.Sub(c.since); d < ttl+recordMargin(ttl) {
		return fmt.Sprintf("published by another process (token %s), unchanged for %v here; replaced after %v", tok, d, ttl+recordMargin(ttl))
	}
	return ""
}

// keepAliveOnNodeLease is KeepAlive on node Leases. It sends no request:
// the record lives while the heartbeat renews its Lease. It reports the
// TTL left from the later of the heartbeat's last send and this store's
// own write, so that the gate's deadline counts from a send, never from
// an answer. The record is lost (ErrRecordLost) once this store saw it
// removed or replaced (in a listing, a watch or its own delete), once the
// heartbeat renews another object (the Lease was deleted and created
// again), or when no renewal was sent within the TTL.
func (s *Store) keepAliveOnNodeLease(l versiongate.RecordLease) (time.Duration, error) {
	n := s.node
	s.mu.Lock()
	o := n.owned[l.Lease]
	if o == nil || o.ended {
		s.mu.Unlock()
		return 0, fmt.Errorf("%w: record %q, lease %d is not one this store holds", versiongate.ErrRecordLost, l.ID, l.Lease)
	}
	ttl, last := o.ttl, o.sent
	uid := types.UID(string(o.lease) + "/" + o.token)
	if e := s.ages.recs[o.id]; e != nil {
		if e.deleted || e.uid != uid {
			o.ended = true
			s.mu.Unlock()
			return 0, fmt.Errorf("%w: the record on %s was removed or replaced", versiongate.ErrRecordLost, s.nodeRef(o.id))
		}
		ttl = min(ttl, e.ttl)
	}
	s.mu.Unlock()
	if sent, lease, ok := n.heartbeat(o.id); ok {
		if lease != o.lease {
			s.endNodeRecord(o)
			return 0, fmt.Errorf("%w: the heartbeat renews %s as object %s, not %s that holds the record: the Lease was deleted and created again", versiongate.ErrRecordLost, s.nodeRef(o.id), lease, o.lease)
		}
		if sent.After(last) {
			last = sent
		}
	}
	left := ttl - s.clock.Since(last)
	if left <= 0 {
		s.endNodeRecord(o)
		return 0, fmt.Errorf("%w: no renewal of %s was sent within its TTL %v", versiongate.ErrRecordLost, s.nodeRef(o.id), ttl)
	}
	return left, nil
}

func (s *Store) endNodeRecord(o *nodeRecord) {
	s.mu.Lock()
	o.ended = true
	s.mu.Unlock()
}

// deleteFromNodeLease is DeleteRecord on node Leases: it removes the
// gate's label and annotation, in a patch conditioned on the
// resourceVersion read, if the Lease still holds this store's record.
func (s *Store) deleteFromNodeLease(ctx context.Context, l versiongate.RecordLease) error {
	n := s.node
	s.mu.Lock()
	o := n.owned[l.Lease]
	s.mu.Unlock()
	if o == nil {
		return nil
	}
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		cur, err := n.leases.Get(ctx, o.id, metav1.GetOptions{})
		if apierrors.IsNotFound(err) && !apiMissing(err) {
			break
		}
		if err != nil {
			return s.wrapNode("get", o.id, err)
		}
		if cur.UID != o.lease || cur.Labels[n.key] != o.token {
			break // not ours any more
		}
		updated, err := n.leases.Patch(ctx, o.id, types.MergePatchType, s.recordPatch(cur.ResourceVersion, nil, nil), metav1.PatchOptions{})
		if apierrors.IsConflict(err) {
			continue
		}
		if err != nil {
			return s.wrapNode("patch", o.id, err)
		}
		if rev, err := revision(s.nodeRef(o.id), updated.ResourceVersion); err == nil {
			s.mu.Lock()
			s.ages.observe(o.id, s.recordUID(updated), nil, rev, o.ttl, s.clock.Now())
			s.mu.Unlock()
		}
		break
	}
	s.mu.Lock()
	o.ended = true
	delete(n.owned, l.Lease)
	s.mu.Unlock()
	return nil
}

// expireOnNodeLease removes a record judged dead from its node Lease: the
// gate's label and annotation go, in a patch conditioned on the
// resourceVersion judged; the Lease itself stays (it is the node's). A
// Lease renewed or written meanwhile refuses it (errRecordAlive).
func (s *Store) expireOnNodeLease(ctx context.Context, d deadRecord) error {
	rv := fmt.Sprint(d.rv)
	updated, err := s.node.leases.Patch(ctx, d.id, types.MergePatchType, s.recordPatch(rv, nil, nil), metav1.PatchOptions{})
	switch {
	case err == nil:
		logr.FromContextOrDiscard(ctx).Info("Removed a dead node record from its node Lease", "lease", s.nodeRef(d.id), "resourceVersion", rv)
		if rev, err := revision(s.nodeRef(d.id), updated.ResourceVersion); err == nil {
			s.mu.Lock()
			s.ages.observe(d.id, s.recordUID(updated), nil, rev, leaseTTL(updated), s.clock.Now())
			s.mu.Unlock()
		}
		return nil
	case apierrors.IsNotFound(err) && !apiMissing(err):
		return nil
	case apierrors.IsConflict(err):
		return fmt.Errorf("%w: %s changed since resourceVersion %s", errRecordAlive, s.nodeRef(d.id), rv)
	}
	return s.wrapNode("patch", d.id, err)
}
