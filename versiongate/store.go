package versiongate

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Errors a Store returns, and the gate branches on.
var (
	// ErrRecordHeld is wrapped by Store.PublishRecord when a record with
	// the node's ID already exists (another process with the same NodeID,
	// or the record of an earlier run that has not expired yet). The gate
	// retries until it is gone.
	ErrRecordHeld = errors.New("versiongate: node record held by another lease")
	// ErrNodesChanged is wrapped by Store.WriteStatus when a node record
	// changed after the revision the write was conditioned on: the
	// summary the leader acted on is stale. The gate waits for the next
	// summary and tries again.
	ErrNodesChanged = errors.New("versiongate: node records changed since the summary")
	// ErrStatusDeleted is wrapped by a Store's status operations while
	// the status is being deleted and the store holds it, unreadable,
	// until a Fence finishes the deletion (the Kubernetes store's
	// finalizer). It is never a missing status: nodes keep waiting. The
	// gate's leader answers it within its term by fencing again with its
	// own term and starting its reconcile over from a fresh read.
	ErrStatusDeleted = errors.New("versiongate: the status is being deleted")
)

// FencedOffError is the error Store.Fence returns, wrapping
// ErrLeadershipLost, when the store's fence holds a token above the
// term's own. Either a later term fenced the store (this term is about to
// end), or tokens went back (a Lease recreated by an old client, a
// restored backup of the election's store) and no term can lead until an
// operator clears the fence. The gate reports it as a FencedOff warning.
type FencedOffError struct {
	// Fence names the fence, for example the etcd key that holds it.
	Fence string
	// Stored is the token the fence holds; 0 if it could not be read.
	Stored uint64
	// Token is the refused term's token.
	Token uint64
	// Clear says how an operator clears the fence.
	Clear string
}

// Error says which fence refused which token, and how to clear it.
func (e *FencedOffError) Error() string {
	stored := "an unreadable token"
	if e.Stored != 0 {
		stored = fmt.Sprintf("token %d", e.Stored)
	}
	return fmt.Sprintf("%v: %s holds %s, above this term's token %d; if no later leader exists, tokens went back: %s", ErrLeadershipLost, e.Fence, stored, e.Token, e.Clear)
}

// Unwrap returns ErrLeadershipLost.
func (e *FencedOffError) Unwrap() error { return ErrLeadershipLost }

// Record is one node record, as a Store lists it or reports a change of it.
type Record struct {
	// ID is the record's key below the nodes prefix: the node's ID.
	ID string
	// Value is the record's value; nil in a change means the record was
	// deleted (or expired), unless Corrupt is set.
	Value []byte
	// Corrupt, when not nil, says the store holds this record but cannot
	// hand back its value as stored (on the Kubernetes store, a value
	// annotation that is not base64, as an operator's typo leaves); it
	// wraps ErrCorruptRecord. The gate counts such a record as a node of
	// unknown release, as it counts one whose value does not decode: a
	// member that blocks every restriction until it is repaired or goes.
	Corrupt error
}

// RecordLease identifies a record a Store published for this node, bound
// to a lease that ends it unless kept alive.
type RecordLease struct {
	// ID is the record's ID.
	ID string
	// Lease is the store's identifier of the lease.
	Lease int64
	// TTL is the lease's time to live as granted, from the publish.
	TTL time.Duration
	// Granted is the lease's full duration, when the store counts TTL
	// from an earlier renewal than the publish (the Kubernetes store with
	// records kept alive by node Leases: the node Lease's duration); zero
	// means TTL. The gate's safety margin is a tenth of it, at least
	// 500ms, the margin the store's own judgement of expiry adds.
	Granted time.Duration
	// Revision is the store revision at which the record was created.
	Revision int64
}

// StoredStatus is the status as a Store read it.
type StoredStatus struct {
	// Value is the encoded status (see DecodeStatus); nil when no status
	// exists.
	Value []byte
	// Revision is a store revision at which Value is current: a watch from
	// it misses no later change.
	Revision int64
	// FirstBoot, with Value nil, says the store proves that no status was
	// deleted: the status is absent because none was ever written (the
	// Kubernetes store keeps a deleted status visible with a finalizer,
	// so its empty status object is such a proof). A store that cannot
	// tell (etcd) leaves it false. The leader then reports a missing
	// status among other nodes' records at info level instead of with an
	// error and a StatusMissing warning; it waits the same way either way.
	FirstBoot bool
	// Corrupt, when not nil, says the store holds a status it cannot hand
	// back as an encoded one (on the Kubernetes store, a value annotation
	// that is not base64, as an operator's typo leaves); it wraps
	// ErrCorruptStatus, and Value is nil. The gate treats such a status as
	// one that DecodeStatus refuses: it blocks WaitReady and is
	// overwritten only after a successful reconcile.
	Corrupt error
}

// Store is the storage under a Gate: the node records, the status, and
// status writes fenced by the leader's term.
//
// etcdstore.New (package versiongate/etcdstore) is the implementation on
// etcd, kubestore.New (package versiongate/kubestore) the one on the
// Kubernetes API alone; versiongatetest.Store is an in-memory one with
// knobs for adversity. All pass versiongatetest.RunStoreConformance, which
// is the executable form of this contract.
//
// A record "changes" when it is created, deleted, or its value changes; a
// keep-alive is no change, and a store does not report one.
//
// Revisions are one counter per store that every change of a record or
// of the status raises; they order record changes and let a write be
// conditioned on no record having changed since a listing. They are
// positive, even before the first change (etcd's start at 1): WriteStatus
// takes nodesRev 0 for "unconditioned", so a listing at revision 0 would
// turn the gate's conditioned writes into unconditioned ones.
//
// Fencing: a status write carries the writer's term and is refused, at
// the moment the store applies it, unless that term is still the newest
// one: for a term with an etcd guard (see etcdstore.Guard) the etcd store
// puts the guard in the write's transaction; for any other term (a
// Kubernetes Lease term, an in-memory election's) the store keeps the
// highest fencing token that called Fence and refuses the write of a
// smaller one, compared in the same transaction as the write.
//
// Methods are safe for concurrent use. Errors other than those documented
// are transient: the gate retries them.
type Store interface {
	// PublishRecord creates the record id with value, bound to a new lease
	// of ttl, only if no record id exists; otherwise it returns an error
	// wrapping ErrRecordHeld and creates nothing.
	PublishRecord(ctx context.Context, id string, value []byte, ttl time.Duration) (RecordLease, error)
	// KeepAlive renews the lease once and checks that the record is still
	// bound to it. It returns the TTL granted from now, or an error
	// wrapping ErrRecordLost when the lease or the record is gone.
	KeepAlive(ctx context.Context, l RecordLease) (time.Duration, error)
	// DeleteRecord ends the lease, deleting the record at once. A lease
	// already gone is not an error.
	DeleteRecord(ctx context.Context, l RecordLease) error

	// ListRecords returns every record and the revision at which the
	// listing is complete.
	ListRecords(ctx context.Context) ([]Record, int64, error)
	// WatchRecords calls fn with every batch of record changes after rev,
	// in revision order, each with the revision up to which the changes
	// are complete. It blocks until ctx ends (returning ctx.Err()) or the
	// watch fails (returning why; the caller lists again). fn is called
	// from the calling goroutine.
	WatchRecords(ctx context.Context, rev int64, fn func(changes []Record, rev int64)) error

	// ReadStatus reads the status.
	ReadStatus(ctx context.Context) (StoredStatus, error)
	// WatchStatus calls fn with the status after each change after rev
	// (intermediate values may be skipped, the newest never is) until fn
	// returns true, then returns nil. It returns ctx.Err() when ctx ends,
	// or why the watch failed. fn is called from the calling goroutine.
	WatchStatus(ctx context.Context, rev int64, fn func(StoredStatus) bool) error

	// Fence makes the store refuse every status write of an earlier term
	// from now on. The gate calls it once at the start of each term,
	// before it reads the status. It returns an error wrapping
	// ErrLeadershipLost if a later term has fenced the store already: a
	// *FencedOffError when the fence holds a higher token. Fencing again
	// with the term that fenced last changes nothing, except that it
	// finishes a deletion of the status the store holds (see
	// ErrStatusDeleted): the gate's leader calls it again, mid-term, for
	// that.
	Fence(ctx context.Context, t Term) error
	// WriteStatus writes value as the status if t is still the newest term
	// (see Fencing above; a token term must have called Fence) and, when
	// nodesRev > 0, no existing record changed after revision nodesRev. It
	// returns an error wrapping ErrLeadershipLost or ErrNodesChanged when
	// the respective condition fails; nothing is written then. A store
	// that cannot check the records in the write's own transaction (the
	// Kubernetes store) writes, then validates: on ErrNodesChanged it has
	// reverted the write before returning, and readers may have seen the
	// value in between, which only makes them wait. nodesRev must come
	// from this store's own ListRecords or WatchRecords.
	WriteStatus(ctx context.Context, t Term, value []byte, nodesRev int64) error
}
