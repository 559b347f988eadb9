package kubestore

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/reconkit/reconkit/versiongate"
)

// ownedRecord is a record this store published: the object it created and
// last renewed, so that each renewal is conditioned on it.
type ownedRecord struct {
	id    string
	lease *coordinationv1.Lease // as last written
	ttl   time.Duration
}

// leaseSeconds rounds ttl up to whole seconds, at least one.
func leaseSeconds(ttl time.Duration) int32 {
	return int32(max((ttl+time.Second-1)/time.Second, 1))
}

// recordValue decodes a record Lease's value. It is never nil, which
// means deleted: a record with no value, or one that does not decode, has
// an empty value, which the gate reports as a record that does not decode.
func (s *Store) recordValue(l *coordinationv1.Lease) []byte {
	key := AnnotationValue
	if s.node != nil {
		key = s.node.key
	}
	b, err := base64.StdEncoding.DecodeString(l.Annotations[key])
	if err != nil || b == nil {
		return []byte{}
	}
	return b
}

// PublishRecord implements versiongate.Store: it creates the record Lease
// only if absent. When one exists it returns an error wrapping
// ErrRecordHeld, and judges the existing record as any observer does:
// once it has not changed for its TTL plus the margin on this process's
// clock, it deletes it (conditioned on the resourceVersion and UID it
// judged) and creates its own.
func (s *Store) PublishRecord(ctx context.Context, id string, value []byte, ttl time.Duration) (versiongate.RecordLease, error) {
	if s.node != nil {
		return s.publishOnNodeLease(ctx, id, value)
	}
	name, err := s.recordName(id)
	if err != nil {
		return versiongate.RecordLease{}, err
	}
	secs := leaseSeconds(ttl)
	now := s.clock.Now()
	mt := metav1.NewMicroTime(now)
	holder := id
	want := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Namespace:   s.ns,
			Labels:      map[string]string{LabelGate: s.gate, LabelRole: RoleRecord},
			Annotations: map[string]string{AnnotationValue: base64.StdEncoding.EncodeToString(value)},
		},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &secs, AcquireTime: &mt, RenewTime: &mt},
	}
	created, err := s.leases.Create(ctx, want, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		if err := s.judgeHeld(ctx, id, name); err != nil {
			return versiongate.RecordLease{}, err
		}
		created, err = s.leases.Create(ctx, want, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return versiongate.RecordLease{}, fmt.Errorf("%w: %s was created again by another process", versiongate.ErrRecordHeld, s.ref(name))
		}
	}
	if err != nil {
		return versiongate.RecordLease{}, s.wrap("create", name, err)
	}
	rev, err := revision(s.ref(name), created.ResourceVersion)
	if err != nil {
		return versiongate.RecordLease{}, err
	}
	granted := time.Duration(secs) * time.Second
	s.mu.Lock()
	s.nextLease++
	lid := s.nextLease
	s.owned[lid] = &ownedRecord{id: id, lease: created, ttl: granted}
	s.ages.observe(id, created.UID, value, rev, granted, now)
	s.mu.Unlock()
	return versiongate.RecordLease{ID: id, Lease: lid, TTL: granted, Revision: rev}, nil
}

// judgeHeld reads the record that holds id and deletes it if it is dead
// on this process's clock; it returns an error wrapping ErrRecordHeld
// while it is not.
func (s *Store) judgeHeld(ctx context.Context, id, name string) error {
	cur, err := s.leases.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) && !apiMissing(err) {
		return nil // gone meanwhile: create again
	}
	if err != nil {
		return s.wrap("get", name, err)
	}
	if cur.Labels[LabelGate] != s.gate || cur.Labels[LabelRole] != RoleRecord {
		return fmt.Errorf("%w: %s exists and is not a record of gate %q (labels %v); delete or rename it", versiongate.ErrRecordHeld, s.ref(name), s.gate, cur.Labels)
	}
	rv, err := revision(s.ref(name), cur.ResourceVersion)
	if err != nil {
		return err
	}
	now := s.clock.Now()
	s.mu.Lock()
	s.ages.observe(id, cur.UID, s.recordValue(cur), rv, leaseTTL(cur), now)
	e := s.ages.recs[id]
	dead := e != nil && !e.deleted && e.uid == cur.UID && e.rv == rv && now.Sub(e.at) >= e.ttl+recordMargin(e.ttl)
	var unchanged time.Duration
	if e != nil {
		unchanged = now.Sub(e.at)
	}
	s.mu.Unlock()
	if !dead {
		return fmt.Errorf("%w: %s, held by %q, unchanged for %v here (dead after its TTL %v plus %v)",
			versiongate.ErrRecordHeld, s.ref(name), ptrString(cur.Spec.HolderIdentity), unchanged, leaseTTL(cur), recordMargin(leaseTTL(cur)))
	}
	if err := s.deleteDead(ctx, deadRecord{id: id, uid: cur.UID, rv: rv}); err != nil {
		return fmt.Errorf("%w: %w", versiongate.ErrRecordHeld, err)
	}
	return nil
}

func ptrString(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// deleteDead deletes a record judged dead, only if it is still the object
// at the resourceVersion judged. A record renewed or replaced meanwhile is
// left alone (errRecordAlive); one already gone is fine.
func (s *Store) deleteDead(ctx context.Context, d deadRecord) error {
	if s.node != nil {
		return s.expireOnNodeLease(ctx, d)
	}
	name, err := s.recordName(d.id)
	if err != nil {
		return err
	}
	rv := fmt.Sprint(d.rv)
	uid := d.uid
	err = s.leases.Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &rv, UID: &uid}})
	switch {
	case err == nil:
		// The tracker learns of the deletion as of anything else, from
		// the watch (which reports it) or the next listing.
		logr.FromContextOrDiscard(ctx).Info("Deleted a dead node record", "lease", s.ref(name), "resourceVersion", rv)
		return nil
	case apierrors.IsNotFound(err) && !apiMissing(err):
		return nil
	case apierrors.IsConflict(err):
		return fmt.Errorf("%w: %s changed since resourceVersion %s", errRecordAlive, s.ref(name), rv)
	}
	return s.wrap("delete", name, err)
}

// errRecordAlive is the reason a dead record's deletion was refused: it
// changed since it was judged.
var errRecordAlive = errors.New("record changed since it was judged dead")

// KeepAlive implements versiongate.Store: it renews the record's
// renewTime in an update conditioned on the resourceVersion of this
// store's last write of it. A record gone or replaced (404, or a 409 with
// another object or holder in place) wraps ErrRecordLost.
func (s *Store) KeepAlive(ctx context.Context, l versiongate.RecordLease) (time.Duration, error) {
	if s.node != nil {
		return s.keepAliveOnNodeLease(l)
	}
	s.mu.Lock()
	o := s.owned[l.Lease]
	s.mu.Unlock()
	if o == nil {
		return 0, fmt.Errorf("%w: record %q, lease %d is not one this store holds", versiongate.ErrRecordLost, l.ID, l.Lease)
	}
	name := o.lease.Name
	for attempt := 0; ; attempt++ {
		now := s.clock.Now()
		next := o.lease.DeepCopy()
		mt := metav1.NewMicroTime(now)
		next.Spec.RenewTime = &mt
		updated, err := s.leases.Update(ctx, next, metav1.UpdateOptions{})
		switch {
		case err == nil:
			rev, err := revision(s.ref(name), updated.ResourceVersion)
			if err != nil {
				return 0, err
			}
			if updated.UID != o.lease.UID {
				return 0, fmt.Errorf("%w: %s is another object (uid %s, not %s)", versiongate.ErrRecordLost, s.ref(name), updated.UID, o.lease.UID)
			}
			s.mu.Lock()
			o.lease = updated
			s.ages.observe(o.id, updated.UID, s.recordValue(updated), rev, o.ttl, now)
			s.mu.Unlock()
			return o.ttl, nil
		case apierrors.IsNotFound(err) && !apiMissing(err):
			return 0, fmt.Errorf("%w: %s is gone", versiongate.ErrRecordLost, s.ref(name))
		case apierrors.IsConflict(err) && attempt == 0:
			// Our own earlier renewal may have landed with its answer
			// lost. Only this store writes its record (observers only
			// delete it), so the same object with the same holder and
			// value is ours: renew it from there, once.
			cur, gerr := s.leases.Get(ctx, name, metav1.GetOptions{})
			if apierrors.IsNotFound(gerr) && !apiMissing(gerr) {
				return 0, fmt.Errorf("%w: %s is gone", versiongate.ErrRecordLost, s.ref(name))
			}
			if gerr != nil {
				return 0, s.wrap("get", name, gerr)
			}
			if cur.UID != o.lease.UID || ptrString(cur.Spec.HolderIdentity) != ptrString(o.lease.Spec.HolderIdentity) ||
				cur.Annotations[AnnotationValue] != o.lease.Annotations[AnnotationValue] {
				return 0, fmt.Errorf("%w: %s was replaced or changed by another writer", versiongate.ErrRecordLost, s.ref(name))
			}
			s.mu.Lock()
			o.lease = cur
			s.mu.Unlock()
		case apierrors.IsConflict(err):
			return 0, fmt.Errorf("%w: %s: %w", versiongate.ErrRecordLost, s.ref(name), err)
		default:
			return 0, s.wrap("update", name, err)
		}
	}
}

// DeleteRecord implements versiongate.Store: it deletes the record,
// conditioned on the object and resourceVersion this store last wrote; a
// record already gone is no error.
func (s *Store) DeleteRecord(ctx context.Context, l versiongate.RecordLease) error {
	if s.node != nil {
		return s.deleteFromNodeLease(ctx, l)
	}
	s.mu.Lock()
	o := s.owned[l.Lease]
	s.mu.Unlock()
	if o == nil {
		return nil
	}
	name := o.lease.Name
	rv, uid := o.lease.ResourceVersion, o.lease.UID
	err := s.leases.Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &rv, UID: &uid}})
	if err != nil && !(apierrors.IsNotFound(err) && !apiMissing(err)) && !apierrors.IsConflict(err) {
		return s.wrap("delete", name, err)
	}
	s.mu.Lock()
	delete(s.owned, l.Lease)
	s.mu.Unlock()
	return nil
}

// reap deletes the records dead on this process's clock, each
// conditioned on the resourceVersion and UID judged.
func (s *Store) reap(ctx context.Context) {
	s.mu.Lock()
	dead := s.ages.dead(s.clock.Now())
	s.mu.Unlock()
	for _, d := range dead {
		if err := s.deleteDead(ctx, d); err != nil && !errors.Is(err, errRecordAlive) {
			logr.FromContextOrDiscard(ctx).Info("Could not delete a dead node record", "id", d.id, "err", err.Error())
		}
	}
}
