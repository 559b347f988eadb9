package kubestore

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/reconkit/reconkit/versiongate"
)

// ownedRecord is a record this store published: the record object it
// created, and what keeps it alive: with records in Namespace its
// heartbeat Lease as last written, so that each renewal is conditioned on
// it; on node Leases the node Lease's object.
type ownedRecord struct {
	id     string
	name   string    // the record Lease's name
	record types.UID // the record object
	rev    int64     // the revision that created it
	ttl    time.Duration
	hb     *coordinationv1.Lease // records in Namespace: the heartbeat
	node   types.UID             // records on node Leases: the node Lease
	// value is the value annotation as published.
	value string
	// damaged is the record as last seen (in a listing or a watch) with
	// another value annotation than value (an operator's edit, a typo):
	// the next successful KeepAlive writes value back, conditioned on
	// its resourceVersion. nil while the record is as published.
	damaged *coordinationv1.Lease
	// lost is set once this store saw the record deleted or replaced (in
	// a listing or a watch), deleted it, or its keep-alive failed.
	lost bool
	// stopped is set once KeepAlive, finding the record lost, deleted the
	// heartbeat (or tried to).
	stopped bool
	// pending is set while the record's create is in flight (record and
	// rev unknown): early keeps what listings and watch events showed of
	// its ID meanwhile, applied once the create's answer names the object
	// (see Store.pending).
	pending bool
	early   []sighting
}

// sighting is one listing's or watch event's view of a record ID: the
// object (nil: a listing without it), whether the event deleted it, and
// the event's or the listing's revision.
type sighting struct {
	l       *coordinationv1.Lease
	deleted bool
	rev     int64
	listing bool
}

// note applies a sighting of o's ID to o: the object deleted or replaced
// after o's creation makes o lost; its value changed, damaged (noteValue).
// A sighting while o's create is in flight is kept until settle. s.mu is
// held.
func (o *ownedRecord) note(sg sighting) {
	if o.pending {
		o.early = append(o.early, sg)
		return
	}
	if o.lost || (sg.listing && o.rev > sg.rev) || (!sg.listing && sg.rev <= o.rev) {
		return
	}
	switch {
	case sg.l == nil, sg.deleted == (sg.l.UID == o.record):
		// Listed without it, deleted, or another object in its place.
		o.lost = true
	case sg.deleted:
		// An older object of the name deleted: not ours.
	case sg.listing:
		if lrv, err := strconv.ParseInt(sg.l.ResourceVersion, 10, 64); err == nil {
			o.noteValue(sg.l, lrv)
		}
	default:
		o.noteValue(sg.l, sg.rev)
	}
}

// pending registers a record of id that this store is about to create,
// before the create is sent, so that a deletion or an edit of it that a
// listing or watch shows before the create's answer is back is not
// missed: without it a record deleted in that window was never known
// lost, and its heartbeat renewed for ever. settle completes the
// registration; drop undoes it.
func (s *Store) pending(id, name string) int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextLease++
	s.owned[s.nextLease] = &ownedRecord{id: id, name: name, pending: true}
	return s.nextLease
}

// settle completes the registration lid of the record created as rec at
// revision rev, and applies what was seen of its ID meanwhile.
func (s *Store) settle(lid int64, rec *coordinationv1.Lease, rev int64, fill func(*ownedRecord)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	o := s.owned[lid]
	o.record, o.rev, o.value = rec.UID, rev, rec.Annotations[AnnotationValue]
	fill(o)
	early := o.early
	o.pending, o.early = false, nil
	for _, sg := range early {
		o.note(sg)
	}
}

// drop removes the registration lid of a record not created.
func (s *Store) drop(lid int64) {
	s.mu.Lock()
	delete(s.owned, lid)
	s.mu.Unlock()
}

// leaseSeconds rounds ttl up to whole seconds, at least one.
func leaseSeconds(ttl time.Duration) int32 {
	return int32(max((ttl+time.Second-1)/time.Second, 1))
}

// livenessRef is AnnotationHeartbeat's value naming a Lease object.
func livenessRef(l *coordinationv1.Lease) string {
	return l.Namespace + "/" + l.Name + "/" + string(l.UID)
}

// parseRef splits an AnnotationHeartbeat value.
func parseRef(ref string) (ns, name string, uid types.UID, ok bool) {
	parts := strings.Split(ref, "/")
	if len(parts) != 3 || parts[0] == "" || parts[1] == "" || parts[2] == "" {
		return "", "", "", false
	}
	return parts[0], parts[1], types.UID(parts[2]), true
}

// recordValue decodes a record Lease's value. A value annotation that is
// not base64 (an operator's typo), missing or empty returns a nil value
// and corrupt, wrapping versiongate.ErrCorruptRecord: never an empty value,
// which would make the record read as deleted and its node, perhaps
// still serving, as gone. The gate counts a corrupt record as a node of
// unknown release, which blocks every restriction, until the record's
// owner repairs it at its next keep-alive (TestNonBase64RecordBlocksUntilRepaired).
func (s *Store) recordValue(l *coordinationv1.Lease) (value []byte, corrupt error) {
	a, ok := l.Annotations[AnnotationValue]
	if !ok {
		return nil, fmt.Errorf("%w: %s has no annotation %s", versiongate.ErrCorruptRecord, s.ref(l.Name), AnnotationValue)
	}
	b, err := base64.StdEncoding.DecodeString(a)
	switch {
	case err != nil:
		return nil, fmt.Errorf("%w: %s: annotation %s is not base64: %w", versiongate.ErrCorruptRecord, s.ref(l.Name), AnnotationValue, err)
	case len(b) == 0:
		return nil, fmt.Errorf("%w: %s: annotation %s is empty", versiongate.ErrCorruptRecord, s.ref(l.Name), AnnotationValue)
	}
	return b, nil
}

// storedValue is a record Lease's value annotation as stored, never nil:
// what the tracker compares, so that a value that does not decode is a
// value too, distinct from every other.
func storedValue(l *coordinationv1.Lease) []byte {
	return append([]byte{}, l.Annotations[AnnotationValue]...)
}

// record is the versiongate.Record of the record Lease l.
func (s *Store) record(id string, l *coordinationv1.Lease) versiongate.Record {
	v, corrupt := s.recordValue(l)
	return versiongate.Record{ID: id, Value: v, Corrupt: corrupt}
}

// PublishRecord implements versiongate.Store. With records in Namespace it
// creates the heartbeat Lease <gate>.<id>, then the record Lease
// <gate>-<id> naming it. A heartbeat that exists already is judged as the
// reaper judges one: once it has not changed for its TTL plus the margin
// on this process's clock, it is deleted (conditioned on the
// resourceVersion and UID judged) and created again; until then the
// error wraps ErrRecordHeld. A record that exists already names another
// heartbeat, gone since ours could be created: it is an orphan, deleted
// (conditioned) and created again. If the record cannot be created, the
// heartbeat just created is deleted.
func (s *Store) PublishRecord(ctx context.Context, id string, value []byte, ttl time.Duration) (versiongate.RecordLease, error) {
	if s.node != nil {
		return s.publishOnNodeLease(ctx, id, value)
	}
	name, err := s.recordName(id)
	if err != nil {
		return versiongate.RecordLease{}, err
	}
	hbName := s.heartbeatName(id)
	secs := leaseSeconds(ttl)
	want := s.newLease(hbName, RoleHeartbeat, id, secs, s.clock.Now())
	hb, err := s.createClearing(ctx, want, func() error { return s.judgeHeld(ctx, hbName) })
	if err != nil {
		return versiongate.RecordLease{}, err
	}
	ref := livenessRef(hb)
	lid := s.pending(id, name)
	rec, rev, err := s.createRecord(ctx, id, name, value, secs, ref, func(cur *coordinationv1.Lease) string {
		if cur.Annotations[AnnotationHeartbeat] == ref {
			return "names the heartbeat just created" // another publisher's, in a race
		}
		return "" // its heartbeat is gone: an orphan
	})
	if err != nil {
		s.drop(lid)
		uid := hb.UID
		if derr := s.leases.Delete(context.WithoutCancel(ctx), hbName, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}}); derr != nil && !apierrors.IsNotFound(derr) {
			logr.FromContextOrDiscard(ctx).Info("Could not delete the heartbeat of a record not published; the reaper will", "lease", s.ref(hbName), "err", derr.Error())
		}
		return versiongate.RecordLease{}, err
	}
	granted := time.Duration(secs) * time.Second
	s.settle(lid, rec, rev, func(o *ownedRecord) { o.ttl, o.hb = granted, hb })
	return versiongate.RecordLease{ID: id, Lease: lid, TTL: granted, Revision: rev}, nil
}

// createRecord creates the record Lease name for id, naming the liveness
// object ref. A record in its way is deleted, conditioned on its UID and
// resourceVersion, and the create tried again, when inTheWay says nothing
// against it; otherwise the error wraps ErrRecordHeld.
func (s *Store) createRecord(ctx context.Context, id, name string, value []byte, secs int32, ref string, inTheWay func(*coordinationv1.Lease) string) (*coordinationv1.Lease, int64, error) {
	want := s.newLease(name, RoleRecord, id, secs, s.clock.Now())
	want.Annotations = map[string]string{
		AnnotationValue:     base64.StdEncoding.EncodeToString(value),
		AnnotationHeartbeat: ref,
	}
	created, err := s.createClearing(ctx, want, func() error {
		cur, err := s.leases.Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err) && !apiMissing(err):
			return nil // gone meanwhile: create again
		case err != nil:
			return s.wrap("get", name, err)
		case cur.Labels[LabelGate] != s.gate || cur.Labels[LabelRole] != RoleRecord:
			return fmt.Errorf("%w: %s exists and is not a record of gate %q (labels %v); delete or rename it", versiongate.ErrRecordHeld, s.ref(name), s.gate, cur.Labels)
		}
		if why := inTheWay(cur); why != "" {
			return fmt.Errorf("%w: %s %s", versiongate.ErrRecordHeld, s.ref(name), why)
		}
		if err := s.deleteCond(ctx, name, cur.UID, cur.ResourceVersion); err != nil {
			return fmt.Errorf("%w: %w", versiongate.ErrRecordHeld, err)
		}
		logr.FromContextOrDiscard(ctx).Info("Replaced an orphaned node record", "lease", s.ref(name), "heartbeat", cur.Annotations[AnnotationHeartbeat])
		return nil
	})
	if err != nil {
		return nil, 0, err
	}
	rev, err := revision(s.ref(name), created.ResourceVersion)
	if err != nil {
		return nil, 0, err
	}
	return created, rev, nil
}

// createClearing creates want. If a Lease of its name is in the way,
// clear removes it, or returns why it stays (an error wrapping
// ErrRecordHeld), and the create is tried once more; a Lease created again
// in between is held by another process.
func (s *Store) createClearing(ctx context.Context, want *coordinationv1.Lease, clear func() error) (*coordinationv1.Lease, error) {
	l, err := s.leases.Create(ctx, want, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		if err := clear(); err != nil {
			return nil, err
		}
		l, err = s.leases.Create(ctx, want, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("%w: %s was created again by another process", versiongate.ErrRecordHeld, s.ref(want.Name))
		}
	}
	if err != nil {
		return nil, s.wrap("create", want.Name, err)
	}
	return l, nil
}

// judgeHeld reads the heartbeat Lease name that holds a record ID and
// deletes it if it is dead on this process's clock; it returns an error
// wrapping ErrRecordHeld while it is not.
func (s *Store) judgeHeld(ctx context.Context, name string) error {
	cur, err := s.leases.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) && !apiMissing(err) {
		return nil // gone meanwhile: create again
	}
	if err != nil {
		return s.wrap("get", name, err)
	}
	if cur.Labels[LabelGate] != s.gate || cur.Labels[LabelRole] != RoleHeartbeat {
		return fmt.Errorf("%w: %s exists and is not a heartbeat of gate %q (labels %v); delete or rename it", versiongate.ErrRecordHeld, s.ref(name), s.gate, cur.Labels)
	}
	rv, err := revision(s.ref(name), cur.ResourceVersion)
	if err != nil {
		return err
	}
	now := s.clock.Now()
	s.mu.Lock()
	s.live.observe(name, cur.UID, []byte{}, "", rv, leaseTTL(cur), now)
	e := s.live.recs[name]
	dead := e != nil && e.uid == cur.UID && e.rv == rv && e.dead(now)
	var unchanged time.Duration
	if e != nil {
		unchanged = now.Sub(e.at)
	}
	s.mu.Unlock()
	if !dead {
		return fmt.Errorf("%w: the heartbeat %s, renewed by %q, unchanged for %v here (dead after its TTL %v plus %v)",
			versiongate.ErrRecordHeld, s.ref(name), ptrString(cur.Spec.HolderIdentity), unchanged, leaseTTL(cur), recordMargin(leaseTTL(cur)))
	}
	if err := s.deleteCond(ctx, name, cur.UID, cur.ResourceVersion); err != nil {
		return fmt.Errorf("%w: %w", versiongate.ErrRecordHeld, err)
	}
	logr.FromContextOrDiscard(ctx).Info("Deleted a dead heartbeat in the way of a publish", "lease", s.ref(name), "resourceVersion", cur.ResourceVersion)
	return nil
}

func ptrString(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// deleteCond deletes the Lease name in Namespace only if it is still the
// object uid at resourceVersion rv (rv "" conditions on the object only).
// One already gone is fine; one changed since wraps errRecordAlive.
func (s *Store) deleteCond(ctx context.Context, name string, uid types.UID, rv string) error {
	pre := &metav1.Preconditions{UID: &uid}
	if rv != "" {
		pre.ResourceVersion = &rv
	}
	err := s.leases.Delete(ctx, name, metav1.DeleteOptions{Preconditions: pre})
	switch {
	case err == nil, apierrors.IsNotFound(err) && !apiMissing(err):
		return nil
	case apierrors.IsConflict(err):
		return fmt.Errorf("%w: %s changed since resourceVersion %s", errRecordAlive, s.ref(name), rv)
	}
	return s.wrap("delete", name, err)
}

// errRecordAlive is the reason a conditioned delete was refused: the
// object changed since it was judged.
var errRecordAlive = errors.New("changed since it was judged")

// owner returns the owned record of a lease, or an error wrapping
// ErrRecordLost if this store holds none or it is lost.
func (s *Store) owner(l versiongate.RecordLease) (*ownedRecord, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	o := s.owned[l.Lease]
	switch {
	case o == nil:
		return nil, fmt.Errorf("%w: record %q, lease %d is not one this store holds", versiongate.ErrRecordLost, l.ID, l.Lease)
	case o.lost:
		return nil, fmt.Errorf("%w: %s was deleted or replaced", versiongate.ErrRecordLost, s.ref(o.name))
	}
	return o, nil
}

// stopHeartbeat deletes, once, the heartbeat of l's record, which this
// store found lost, conditioned on the resourceVersion of its own last
// renewal. Gates that saw the record deleted by someone other than the
// reaper count the node as a member until its heartbeat is gone or dead
// (see heldDeath): this tells them the node's gate has learned, and stops
// serving as KeepAlive returns.
func (s *Store) stopHeartbeat(ctx context.Context, l versiongate.RecordLease) {
	s.mu.Lock()
	o := s.owned[l.Lease]
	if o == nil || !o.lost || o.hb == nil || o.stopped {
		s.mu.Unlock()
		return
	}
	o.stopped = true
	hb := o.hb
	s.mu.Unlock()
	if err := s.deleteCond(ctx, hb.Name, hb.UID, hb.ResourceVersion); err != nil {
		logr.FromContextOrDiscard(ctx).Info("Could not delete the heartbeat of a lost record; it expires", "lease", s.ref(hb.Name), "err", err.Error())
	}
}

func (s *Store) loseRecord(o *ownedRecord) {
	s.mu.Lock()
	o.lost = true
	s.mu.Unlock()
}

// KeepAlive implements versiongate.Store. With records in Namespace it
// renews the heartbeat Lease's renewTime in an update conditioned on the
// resourceVersion of this store's last write of it. A heartbeat gone or
// replaced (404, or a 409 with another object or holder in place), or a
// record this store saw deleted or replaced, wraps ErrRecordLost.
func (s *Store) KeepAlive(ctx context.Context, l versiongate.RecordLease) (time.Duration, error) {
	if s.node != nil {
		return s.keepAliveOnNodeLease(ctx, l)
	}
	o, err := s.owner(l)
	if err != nil {
		s.stopHeartbeat(ctx, l)
		return 0, err
	}
	s.mu.Lock()
	hb := o.hb
	s.mu.Unlock()
	name := hb.Name
	stale := 0 // conflicts whose read found the heartbeat as last written
	for {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		next := hb.DeepCopy()
		mt := metav1.NewMicroTime(s.clock.Now())
		next.Spec.RenewTime = &mt
		updated, err := s.leases.Update(ctx, next, metav1.UpdateOptions{})
		switch {
		case err == nil:
			if updated.UID != hb.UID {
				s.loseRecord(o)
				return 0, fmt.Errorf("%w: %s is another object (uid %s, not %s)", versiongate.ErrRecordLost, s.ref(name), updated.UID, hb.UID)
			}
			s.mu.Lock()
			o.hb = updated
			lost := o.lost
			s.mu.Unlock()
			if lost {
				s.stopHeartbeat(ctx, l)
				return 0, fmt.Errorf("%w: %s was deleted or replaced", versiongate.ErrRecordLost, s.ref(o.name))
			}
			s.repair(ctx, o)
			return o.ttl, nil
		case apierrors.IsNotFound(err) && !apiMissing(err):
			s.loseRecord(o)
			return 0, fmt.Errorf("%w: the heartbeat %s is gone", versiongate.ErrRecordLost, s.ref(name))
		case apierrors.IsConflict(err) && stale == 0:
			// Our own earlier renewal may have landed with its answer
			// lost, or another controller edited the Lease (a label, an
			// annotation). Only this store renews its heartbeat (others
			// only delete it), so the same object with the same holder
			// is ours: renew it from there. A read that finds it as last
			// written is a conflict without progress, and a second one
			// ends the call; a new resourceVersion is another writer's
			// progress, and starts the count again, so that a busy
			// writer of the Lease never costs the node its record.
			cur, gerr := s.leases.Get(ctx, name, metav1.GetOptions{})
			if apierrors.IsNotFound(gerr) && !apiMissing(gerr) {
				s.loseRecord(o)
				return 0, fmt.Errorf("%w: the heartbeat %s is gone", versiongate.ErrRecordLost, s.ref(name))
			}
			if gerr != nil {
				return 0, s.wrap("get", name, gerr)
			}
			if cur.UID != hb.UID || ptrString(cur.Spec.HolderIdentity) != ptrString(hb.Spec.HolderIdentity) {
				s.loseRecord(o)
				return 0, fmt.Errorf("%w: the heartbeat %s was replaced or changed by another writer", versiongate.ErrRecordLost, s.ref(name))
			}
			if cur.ResourceVersion == hb.ResourceVersion {
				stale++
			}
			hb = cur
		case apierrors.IsConflict(err):
			s.loseRecord(o)
			return 0, fmt.Errorf("%w: the heartbeat %s: %w", versiongate.ErrRecordLost, s.ref(name), err)
		default:
			return 0, s.wrap("update", name, err)
		}
	}
}

// DeleteRecord implements versiongate.Store: it deletes the record Lease,
// conditioned on the object this store created, then (records in
// Namespace) its heartbeat, likewise; a record already gone is no error.
func (s *Store) DeleteRecord(ctx context.Context, l versiongate.RecordLease) error {
	s.mu.Lock()
	o := s.owned[l.Lease]
	var hb *coordinationv1.Lease
	if o != nil {
		hb = o.hb // a KeepAlive still running may replace it, under s.mu
	}
	s.mu.Unlock()
	if o == nil {
		return nil
	}
	// The heartbeat first, as the reaper does: a gate that sees the
	// record deleted then finds the heartbeat gone, proof that the node
	// stopped, and need not wait for it to expire (see heldDeath).
	if hb != nil {
		if err := s.deleteCond(ctx, hb.Name, hb.UID, ""); err != nil && !errors.Is(err, errRecordAlive) {
			return err
		}
	}
	if err := s.deleteCond(ctx, o.name, o.record, ""); err != nil && !errors.Is(err, errRecordAlive) {
		return err
	}
	s.mu.Lock()
	o.lost = true
	delete(s.owned, l.Lease)
	s.mu.Unlock()
	return nil
}

// noteRecord applies a record event at revision rev (l, the object; its
// last state when deleted) to this store's own records: one deleted, or
// replaced by another object, is lost; one whose value annotation is not
// the one published is damaged, to be repaired. s.mu is held.
func (s *Store) noteRecord(id string, l *coordinationv1.Lease, deleted bool, rev int64) {
	for _, o := range s.owned {
		if o.id == id {
			o.note(sighting{l: l, deleted: deleted, rev: rev})
		}
	}
}

// noteValue marks o damaged, or no longer, by l, its record as seen at
// revision rev. s.mu is held.
func (o *ownedRecord) noteValue(l *coordinationv1.Lease, rev int64) {
	if o.damaged != nil {
		if seen, err := strconv.ParseInt(o.damaged.ResourceVersion, 10, 64); err == nil && rev < seen {
			return // older than what was noted
		}
	}
	if l.Annotations[AnnotationValue] == o.value {
		o.damaged = nil
		return
	}
	o.damaged = l.DeepCopy()
}

// noteListing applies a listing at revision rev (present: the record
// Leases listed, by ID) to this store's own records: one created before
// rev and not listed is lost; one listed with another value is damaged.
// s.mu is held.
func (s *Store) noteListing(present map[string]*coordinationv1.Lease, rev int64) {
	for _, o := range s.owned {
		o.note(sighting{l: present[o.id], rev: rev, listing: true})
	}
}

// repair writes the published value back into o's record if this store
// saw it damaged: an update conditioned on the resourceVersion seen, so
// that it undoes exactly the edit seen and nothing later. A failure is
// logged; the gates count the record as it is (one that does not decode
// blocks every restriction) until a later keep-alive repairs it.
func (s *Store) repair(ctx context.Context, o *ownedRecord) {
	s.mu.Lock()
	d := o.damaged
	s.mu.Unlock()
	if d == nil {
		return
	}
	next := d.DeepCopy()
	if next.Annotations == nil {
		next.Annotations = map[string]string{}
	}
	next.Annotations[AnnotationValue] = o.value
	log := logr.FromContextOrDiscard(ctx)
	_, err := s.leases.Update(ctx, next, metav1.UpdateOptions{})
	s.mu.Lock()
	if o.damaged == d && (err == nil || apierrors.IsConflict(err) || apierrors.IsNotFound(err)) {
		// Done, or the record changed again since: its next event
		// tells whether it still needs repair.
		o.damaged = nil
	}
	s.mu.Unlock()
	if err != nil {
		log.Info("Could not repair this node's record, whose value was edited; trying again at the next keep-alive", "lease", s.ref(o.name), "err", s.wrap("update", o.name, err).Error())
		return
	}
	log.Info("Repaired this node's record, whose value was edited", "lease", s.ref(o.name), "resourceVersion", d.ResourceVersion)
}
