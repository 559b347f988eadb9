package kubestore

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Uninstall removes the gate's status for good, so that deleting its
// namespace completes: it removes the finalizer Finalizer from the status
// Lease (an update conditioned on the resourceVersion read) and deletes
// the Lease (conditioned on its UID) unless it is being deleted already,
// as it is while its namespace is. A status Lease that is absent is no
// error; one by the status' name that is not this gate's is left alone,
// and the error names the clash.
//
// The finalizer is what keeps a deleted status from reading as a first
// boot (see the package doc), so call Uninstall only when the gate goes
// away with every node of it: a gate that runs afterwards finds no status
// and reconciles once no incompatible node has a record, and a term still
// running may write the status again (Uninstall then reports nothing; run
// it again once every node has stopped). Records, heartbeats and the
// reaper Lease carry no finalizer and go with the namespace.
// Conflicts end the call after fenceAttempts reads that find the Lease
// unchanged, as Fence's do; a read that finds another writer's change
// starts the count again (TestStatusWritesUnderConflicts).
// TestUninstallLetsTheNamespaceGo holds it.
func (s *Store) Uninstall(ctx context.Context) error {
	name := s.statusName()
	var lastRV string // the status Lease's resourceVersion at the last read
	for attempt := 1; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		cur, err := s.leases.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) && !apiMissing(err) {
			return nil
		}
		if err != nil {
			return s.wrap("get", name, err)
		}
		if cur.ResourceVersion != lastRV {
			// Another writer got through since the last read: progress,
			// which starts the count again, as Fence's does.
			lastRV, attempt = cur.ResourceVersion, 1
		}
		if err := s.notOurs(cur, RoleStatus); err != nil {
			return err
		}
		if hasFinalizer(cur) {
			next := cur.DeepCopy()
			next.Finalizers = nil
			for _, f := range cur.Finalizers {
				if f != Finalizer {
					next.Finalizers = append(next.Finalizers, f)
				}
			}
			_, err = s.leases.Update(ctx, next, metav1.UpdateOptions{})
			switch {
			case apierrors.IsConflict(err) && attempt < fenceAttempts:
				continue
			case apierrors.IsNotFound(err) && !apiMissing(err):
				return nil
			case err != nil:
				return fmt.Errorf("%w (removing the finalizer %s)", s.wrap("update", name, err), Finalizer)
			}
		}
		if cur.DeletionTimestamp != nil {
			return nil
		}
		uid := cur.UID
		err = s.leases.Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
		switch {
		case err == nil, apierrors.IsNotFound(err) && !apiMissing(err):
			return nil
		case apierrors.IsConflict(err) && attempt < fenceAttempts:
			continue
		}
		return s.wrap("delete", name, err)
	}
}
