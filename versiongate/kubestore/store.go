package kubestore

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	coordclient "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/utils/clock"

	"github.com/reconkit/reconkit/versiongate"
)

// Labels and annotations the store sets on its Leases.
const (
	// LabelGate holds the gate's name on every Lease of the store.
	LabelGate = "reconkit.io/gate"
	// LabelRole is RoleRecord on a node record, RoleHeartbeat on the
	// Lease that keeps it alive, RoleReaper on the reaper Lease, RoleStatus
	// on the status.
	LabelRole = "reconkit.io/role"
	// RoleRecord marks a node record.
	RoleRecord = "record"
	// RoleHeartbeat marks a record's heartbeat Lease, which its node
	// renews (records in Namespace; see the package doc).
	RoleHeartbeat = "heartbeat"
	// RoleReaper marks the reaper Lease, held by the one Store that
	// watches the records' liveness and deletes dead records.
	RoleReaper = "reaper"
	// RoleStatus marks the status.
	RoleStatus = "status"
	// AnnotationValue holds a record's or the status' encoded value, in
	// base64.
	AnnotationValue = "reconkit.io/value"
	// AnnotationHeartbeat holds, on a record, the Lease whose renewals
	// keep it alive: "<namespace>/<name>/<uid>".
	AnnotationHeartbeat = "reconkit.io/heartbeat"
	// AnnotationTerm holds, on the status, the highest fencing token that
	// called Fence, in decimal.
	AnnotationTerm = "reconkit.io/term"
	// AnnotationUnvalidated is set on the status by a write conditioned on
	// the records until the write is validated; it holds the value the
	// write replaced (base64; empty when there was none). A Fence of a
	// later term puts that value back (see the package doc).
	AnnotationUnvalidated = "reconkit.io/unvalidated-previous"
	// AnnotationStatusDeleted is set on a status Lease a leader's Fence
	// created again after finishing the deletion of the one before (see
	// Fence); it holds when that one was deleted (RFC 3339). Such a
	// status Lease without a value is a missing status, not a first boot.
	AnnotationStatusDeleted = "reconkit.io/status-deleted"
	// Finalizer is kept on the status, so that a delete leaves it
	// terminating, visible, instead of absent as on a first boot.
	Finalizer = "reconkit.io/versiongate-status"
)

// statusSuffix names the status Lease: <gate>-status, and reaperSuffix
// the reaper Lease: <gate>-reaper. No record may have either ID.
const (
	statusSuffix = "status"
	reaperSuffix = "reaper"
)

// The reaper Lease's duration and its holder's renewal interval.
const (
	defaultReaperDuration = 30 * time.Second
	defaultReaperRenew    = 10 * time.Second
)

// Config configures New.
type Config struct {
	// Client is the Kubernetes client; required.
	Client kubernetes.Interface
	// Namespace holds the gate's Leases; required.
	Namespace string
	// Gate names the gate: the prefix of its Lease names and the value of
	// their LabelGate label; required, a DNS-1123 label of at most 48
	// characters.
	Gate string
	// Clock judges record expiry and paces the store's waits; it must run
	// at the real rate (see the package doc). Nil means the real clock.
	Clock clock.WithTicker
	// ListPageSize is the number of records a LIST asks for per page
	// (limit); the pages of one listing are one snapshot. 0 means
	// DefaultListPageSize.
	ListPageSize int64
	// NodeLease, if set, keeps each node's record on the node's own
	// heartbeat Lease instead of a Lease of the store's (see "Records on
	// node Leases" in the package doc). The status stays in Namespace.
	NodeLease *NodeLeaseConfig
}

// DefaultListPageSize is Config.ListPageSize's default, kubectl's page
// size.
const DefaultListPageSize = 500

// Store is the versiongate.Store on the Kubernetes API: node records and
// the status are coordination.k8s.io/v1 Leases in one namespace. Create it
// with New; its methods are safe for concurrent use. A Store is one
// node's view: its record tracker (fed by the listings and watches it
// delivered) is what WriteStatus validates against, so the gate's
// WriteStatus must go through the Store whose ListRecords and
// WatchRecords it follows.
type Store struct {
	leases coordclient.LeaseInterface
	ns     string
	gate   string
	clock  clock.WithTicker
	page   int64

	// identity is this Store's holderIdentity on the reaper Lease, new
	// for every Store; reaperDur and reaperRenew are the reaper Lease's
	// duration and renewal interval.
	identity    string
	reaperDur   time.Duration
	reaperRenew time.Duration

	mu sync.Mutex
	// owned are the records this store published, by RecordLease.Lease.
	owned     map[int64]*ownedRecord
	nextLease int64
	// seen is what this store delivered through ListRecords and
	// WatchRecords: what the gate's summary was built from, what
	// WriteStatus validates against, and the records the reaper judges.
	seen tracker
	// live is what this store saw of the liveness objects (heartbeat
	// Leases, or node Leases), keyed by name: what a record's death is
	// judged on, by the reaper and by PublishRecord.
	live tracker
	// orphans are the records whose liveness object the reaper has not
	// seen alive, by record UID, with when it first noticed.
	orphans map[types.UID]time.Time
	// reaped are the records the reaper deleted (or found gone), by
	// record UID, until seen shows them deleted or replaced: an object of
	// that UID cannot come back, so they are judged no more. Without it a
	// record watch that shows nothing (one ending at once, empty) left the
	// record live in seen, an orphan of the heartbeat the reaper deleted,
	// read (GET) and deleted again every reap interval.
	reaped map[types.UID]bool
	// held are records seen deleted while the heartbeat they named may
	// still be renewed, by record ID (see heldDeath).
	held map[string]*heldDeath
	// statusDeletedAt is when a status Lease this store saw being deleted
	// was deleted, until a Fence created it again: a Fence whose own
	// creation was refused (a namespace being deleted) still marks the
	// one a later Fence creates, so that it never reads as a first boot.
	statusDeletedAt string
	// node is set when records are kept alive by node Leases
	// (Config.NodeLease).
	node *nodeMode
}

var _ versiongate.Store = (*Store)(nil)

// New returns the Store described by cfg.
func New(cfg Config) (*Store, error) {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if cfg.Client == nil {
		bad("Client is nil")
	}
	if cfg.Namespace == "" {
		bad("Namespace is empty")
	} else if msgs := validation.IsDNS1123Label(cfg.Namespace); len(msgs) > 0 {
		bad("Namespace %q: %s", cfg.Namespace, strings.Join(msgs, "; "))
	}
	if cfg.Gate == "" {
		bad("Gate is empty")
	} else if msgs := validation.IsDNS1123Label(cfg.Gate); len(msgs) > 0 || len(cfg.Gate) > 48 {
		msgs = append(msgs, "at most 48 characters, so that record names fit")
		bad("Gate %q: must be a DNS-1123 label (%s)", cfg.Gate, strings.Join(msgs, "; "))
	}
	if cfg.ListPageSize < 0 {
		bad("ListPageSize %d is negative", cfg.ListPageSize)
	}
	node, nerrs := newNodeMode(cfg)
	errs = append(errs, nerrs...)
	if len(errs) > 0 {
		return nil, fmt.Errorf("%w: versiongate/kubestore: %w", versiongate.ErrInvalidConfig, errors.Join(errs...))
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.ListPageSize == 0 {
		cfg.ListPageSize = DefaultListPageSize
	}
	return &Store{
		node:   node,
		leases: cfg.Client.CoordinationV1().Leases(cfg.Namespace),
		ns:     cfg.Namespace,
		gate:   cfg.Gate,
		clock:  cfg.Clock,
		page:   cfg.ListPageSize,
		owned:  map[int64]*ownedRecord{},
		seen:   newTracker(),
		live:   newTracker(),

		orphans:     map[types.UID]time.Time{},
		reaped:      map[types.UID]bool{},
		held:        map[string]*heldDeath{},
		identity:    newToken(),
		reaperDur:   defaultReaperDuration,
		reaperRenew: defaultReaperRenew,
	}, nil
}

// recordName is the Lease name of record id, or an error saying why id
// cannot name one. With records kept alive by heartbeats of the store's,
// the name of its heartbeat Lease (heartbeatName) must be valid too.
func (s *Store) recordName(id string) (string, error) {
	if id == statusSuffix || id == reaperSuffix {
		return "", fmt.Errorf("versiongate/kubestore: record ID %q is reserved for the Lease %s-%s", id, s.gate, id)
	}
	names := []string{s.gate + "-" + id}
	if s.node == nil {
		names = append(names, s.heartbeatName(id))
	}
	for _, name := range names {
		if msgs := validation.IsDNS1123Subdomain(name); len(msgs) > 0 {
			return "", fmt.Errorf("versiongate/kubestore: record ID %q makes the Lease name %q, which is not a valid object name: %s (use lower-case letters, digits, '-' and '.')", id, name, strings.Join(msgs, "; "))
		}
	}
	return names[0], nil
}

// heartbeatName is the name of record id's heartbeat Lease.
func (s *Store) heartbeatName(id string) string { return s.gate + "." + id }

// recordID is the record ID of a record Lease's name.
func (s *Store) recordID(name string) string { return strings.TrimPrefix(name, s.gate+"-") }

func (s *Store) statusName() string { return s.gate + "-" + statusSuffix }

func (s *Store) reaperName() string { return s.gate + "-" + reaperSuffix }

// newLease is a Lease of this gate with the role given, held by holder
// for secs seconds, acquired and renewed at now.
func (s *Store) newLease(name, role, holder string, secs int32, now time.Time) *coordinationv1.Lease {
	mt := metav1.NewMicroTime(now)
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{
			Name:      name,
			Namespace: s.ns,
			Labels:    map[string]string{LabelGate: s.gate, LabelRole: role},
		},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &secs, AcquireTime: &mt, RenewTime: &mt},
	}
}

// notOurs returns an error if l, read by the name of this gate's Lease of
// role, is not labelled as that Lease. Two gates in one namespace can want
// one name (gate a's record b-status is gate a-b's status), and neither
// may write the other's Lease.
func (s *Store) notOurs(l *coordinationv1.Lease, role string) error {
	if l.Labels[LabelGate] == s.gate && l.Labels[LabelRole] == role {
		return nil
	}
	return fmt.Errorf("versiongate/kubestore: %s is not gate %q's %s Lease: it is labelled %s=%q, %s=%q. Another gate in the namespace, or another program, uses this name; "+
		"give gates that share a namespace names that are not another's name followed by '-', or move one to a namespace of its own",
		s.ref(l.Name), s.gate, role, LabelGate, l.Labels[LabelGate], LabelRole, l.Labels[LabelRole])
}

func (s *Store) recordSelector() string {
	return LabelGate + "=" + s.gate + "," + LabelRole + "=" + RoleRecord
}

// watchSelector selects the records and the reaper Lease: what
// WatchRecords watches.
func (s *Store) watchSelector() string {
	return LabelGate + "=" + s.gate + "," + LabelRole + " in (" + RoleRecord + "," + RoleReaper + ")"
}

// ref names a Lease for errors: "Lease ns/name".
func (s *Store) ref(name string) string { return fmt.Sprintf("Lease %s/%s", s.ns, name) }

// wrap names the verb and object of a failed request, and says what to
// do about the failures an operator fixes: missing RBAC, a missing API.
func (s *Store) wrap(verb, name string, err error) error {
	return s.wrapObj(verb, s.ref(name), err)
}

// wrapSel is wrap for a request on the Leases a selector selects.
func (s *Store) wrapSel(verb, sel string, err error) error {
	return s.wrapObj(verb, fmt.Sprintf("Leases in %s (selector %s)", s.ns, sel), err)
}

func (s *Store) wrapObj(verb, obj string, err error) error { return wrapIn(s.ns, verb, obj, err) }

// wrapIn is wrapObj for a Lease in namespace ns.
func wrapIn(ns, verb, obj string, err error) error {
	switch {
	case apierrors.IsForbidden(err):
		return fmt.Errorf("versiongate/kubestore: %s %s: %w (RBAC: the client needs the verb %q on leases.coordination.k8s.io in namespace %s)", verb, obj, err, verb, ns)
	case apiMissing(err):
		return fmt.Errorf("versiongate/kubestore: %s %s: %w (the server does not serve coordination.k8s.io/v1 leases)", verb, obj, err)
	}
	return fmt.Errorf("versiongate/kubestore: %s %s: %w", verb, obj, err)
}

// apiMissing reports whether err is the 404 of a resource the server
// does not serve, rather than of a missing object: such a 404 names no
// object.
func apiMissing(err error) bool {
	if !apierrors.IsNotFound(err) {
		return false
	}
	var st apierrors.APIStatus
	if !errors.As(err, &st) {
		return false
	}
	d := st.Status().Details
	return d == nil || d.Name == ""
}

// revision parses a resourceVersion as a revision.
func revision(what, rv string) (int64, error) {
	n, err := strconv.ParseInt(rv, 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("versiongate/kubestore: %s has resourceVersion %q, not a positive integer: this store needs an apiserver whose resourceVersions are etcd revisions", what, rv)
	}
	return n, nil
}

// leaseTTL is the TTL an observer judges a record by: its
// leaseDurationSeconds, or the gate's default when unset.
func leaseTTL(l *coordinationv1.Lease) time.Duration {
	if d := l.Spec.LeaseDurationSeconds; d != nil && *d > 0 {
		return time.Duration(*d) * time.Second
	}
	return versiongate.DefaultRecordTTL
}

// recordMargin is the gate's margin on a record's TTL: a tenth of the
// TTL, at least 500ms. It repeats versiongate's rule (recordMargin in
// versiongate/record.go), which fences the node at the start of its last
// acknowledged keep-alive plus the TTL less this margin; an observer here
// waits the TTL plus this margin, on its own clock, from when it first saw
// the record's current resourceVersion. The two must stay equal.
func recordMargin(ttl time.Duration) time.Duration {
	return max(ttl/10, 500*time.Millisecond)
}
