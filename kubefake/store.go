package kubefake

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"
)

func (s *Server) next() string {
	s.rv++
	return strconv.FormatUint(s.rv, 10)
}

// newUID returns the server's next uid, shaped as the apiserver's random
// (version 4) UUIDs are. The caller holds s.mu, or is NewServer.
func (s *Server) newUID() types.UID {
	s.uids++
	return types.UID(fmt.Sprintf("%08x-0000-4000-8000-%012x", uint32(s.uids>>48), s.uids&(1<<48-1)))
}

// nameSuffix returns the next five characters that generateName appends,
// from the alphabet the apiserver draws them from, derived from the
// server's sequence rather than drawn at random. The caller holds s.mu.
func (s *Server) nameSuffix() string {
	const alphabet = "bcdfghjklmnpqrstvwxz2456789"
	s.names++
	// A bijective mix of the counter (splitmix64's finaliser), so that
	// consecutive names do not share their first characters.
	x := s.names
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	b := make([]byte, 5)
	for i := range b {
		b[i] = alphabet[x%uint64(len(alphabet))]
		x /= uint64(len(alphabet))
	}
	return string(b)
}

// stampNew sets what the apiserver sets on every new object.
func (s *Server) stampNew(m metav1.Object) {
	if m.GetUID() == "" {
		m.SetUID(s.newUID())
	}
	if ts := m.GetCreationTimestamp(); ts.IsZero() {
		m.SetCreationTimestamp(s.now())
	}
}

func (s *Server) now() metav1.Time {
	return metav1.NewTime(s.clock.Now().Truncate(time.Second))
}

func (s *Server) create(a k8stesting.CreateActionImpl) (bool, runtime.Object, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	obj := a.Object.DeepCopyObject()
	m, err := meta.Accessor(obj)
	if err != nil {
		return true, nil, apierrors.NewBadRequest(err.Error())
	}
	if m.GetResourceVersion() != "" {
		return true, nil, apierrors.NewBadRequest("resourceVersion should not be set on objects to be created")
	}
	if m.GetName() == "" && m.GetGenerateName() != "" {
		m.SetName(m.GetGenerateName() + s.nameSuffix())
	}
	if _, err := s.tracker.Get(a.GetResource(), a.GetNamespace(), m.GetName()); err == nil {
		return true, nil, apierrors.NewAlreadyExists(a.GetResource().GroupResource(), m.GetName())
	}
	m.SetUID("")
	m.SetCreationTimestamp(metav1.Time{})
	m.SetDeletionTimestamp(nil)
	s.stampNew(m)
	m.SetResourceVersion(s.next())
	a.Object = obj
	return s.commit(a, a.GetResource(), a.GetNamespace(), "ADDED", obj, nil)
}

func (s *Server) update(a k8stesting.UpdateActionImpl) (bool, runtime.Object, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	obj := a.Object.DeepCopyObject()
	m, err := meta.Accessor(obj)
	if err != nil {
		return true, nil, apierrors.NewBadRequest(err.Error())
	}
	stored, err := s.tracker.Get(a.GetResource(), a.GetNamespace(), m.GetName())
	if err != nil {
		return true, nil, err
	}
	cur, err := meta.Accessor(stored)
	if err != nil {
		return true, nil, apierrors.NewBadRequest(err.Error())
	}
	if uid := m.GetUID(); uid != "" && uid != cur.GetUID() {
		// The uid an update carries is a precondition, as the apiserver
		// takes it (rest.DefaultUpdatedObjectInfo): the object must be
		// that one, not another of the same name.
		return true, nil, conflictWhy(a.GetResource(), m.GetName(),
			fmt.Sprintf("Precondition failed: UID in precondition: %v, UID in object meta: %v", uid, cur.GetUID()))
	}
	rv := m.GetResourceVersion()
	if rv == "" && !allowsUnconditionalUpdate(a.GetResource().GroupResource()) {
		return true, nil, mustSpecifyResourceVersion(a.GetResource().GroupResource(), m.GetName())
	}
	if rv != "" && rv != cur.GetResourceVersion() {
		return true, nil, conflict(a.GetResource(), m.GetName())
	}
	return s.write(a.GetResource(), a.GetNamespace(), a.GetSubresource(), obj, stored)
}

func (s *Server) patch(a k8stesting.PatchActionImpl) (bool, runtime.Object, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	stored, err := s.tracker.Get(a.GetResource(), a.GetNamespace(), a.GetName())
	if apierrors.IsNotFound(err) && a.GetPatchType() == types.ApplyPatchType {
		return s.applyCreate(a)
	}
	if err != nil {
		return true, nil, err
	}
	cur, err := meta.Accessor(stored)
	if err != nil {
		return true, nil, apierrors.NewBadRequest(err.Error())
	}
	if a.GetPatchType() == types.ApplyPatchType {
		// Server-side apply: the tracker's field management, with no
		// precondition; the result gets a resourceVersion like any write.
		if _, _, err := s.react(a); err != nil {
			return true, nil, err
		}
		applied, err := s.tracker.Get(a.GetResource(), a.GetNamespace(), a.GetName())
		if err != nil {
			return true, nil, err
		}
		return s.write(a.GetResource(), a.GetNamespace(), a.GetSubresource(), applied, stored)
	}
	obj, err := applyPatch(stored, a.GetPatchType(), a.GetPatch())
	if err != nil {
		return true, nil, err
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return true, nil, apierrors.NewBadRequest(err.Error())
	}
	if m.GetResourceVersion() != cur.GetResourceVersion() {
		return true, nil, conflict(a.GetResource(), a.GetName())
	}
	if uid := m.GetUID(); uid != "" && uid != cur.GetUID() {
		// A patch carries no precondition; validation refuses the change.
		return true, nil, invalid(a.GetResource().GroupResource(), a.GetName(),
			field.Invalid(field.NewPath("metadata", "uid"), uid, "field is immutable"))
	}
	return s.write(a.GetResource(), a.GetNamespace(), a.GetSubresource(), obj, stored)
}

// applyCreate creates an object by server-side apply.
func (s *Server) applyCreate(a k8stesting.PatchActionImpl) (bool, runtime.Object, error) {
	if _, _, err := s.react(a); err != nil {
		return true, nil, err
	}
	obj, err := s.tracker.Get(a.GetResource(), a.GetNamespace(), a.GetName())
	if err != nil {
		return true, nil, err
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return true, nil, apierrors.NewBadRequest(err.Error())
	}
	s.stampNew(m)
	m.SetResourceVersion(s.next())
	return s.commit(k8stesting.UpdateActionImpl{
		ActionImpl: k8stesting.ActionImpl{Namespace: a.GetNamespace(), Verb: "update", Resource: a.GetResource()},
		Object:     obj,
	}, a.GetResource(), a.GetNamespace(), "ADDED", obj, nil)
}

// write stores obj over prev, the stored object, with a new
// resourceVersion, keeping what a client cannot change, and finishes a
// deletion whose last finalizer the write removed.
func (s *Server) write(gvr schema.GroupVersionResource, ns, sub string, obj, prev runtime.Object) (bool, runtime.Object, error) {
	m, _ := meta.Accessor(obj)
	cur, err := meta.Accessor(prev)
	if err != nil {
		return true, nil, apierrors.NewBadRequest(err.Error())
	}
	m.SetUID(cur.GetUID())
	m.SetCreationTimestamp(cur.GetCreationTimestamp())
	m.SetDeletionTimestamp(cur.GetDeletionTimestamp())
	m.SetDeletionGracePeriodSeconds(cur.GetDeletionGracePeriodSeconds())
	if cur.GetDeletionTimestamp() != nil {
		if extra := sets.New(m.GetFinalizers()...).Difference(sets.New(cur.GetFinalizers()...)); extra.Len() > 0 {
			return true, nil, invalid(gvr.GroupResource(), m.GetName(), field.Forbidden(field.NewPath("metadata", "finalizers"),
				fmt.Sprintf("no new finalizers can be added if the object is being deleted, found new finalizers %q", sets.List(extra))))
		}
	}
	if unchanged(obj, prev) {
		// The apiserver writes nothing for an update that changes nothing:
		// no new resourceVersion, no watch event; it answers with the
		// stored object.
		return true, prev.DeepCopyObject(), nil
	}
	if g := cur.GetDeletionGracePeriodSeconds(); cur.GetDeletionTimestamp() != nil &&
		len(m.GetFinalizers()) == 0 && (g == nil || *g == 0) {
		// The write that empties the finalizers of an object being
		// deleted is not stored: the apiserver deletes the object as it
		// was (the DELETED event carries that state, at the deletion's
		// resourceVersion) and answers the request's object. A pod whose
		// grace period still runs is not deleted; it waits for a delete
		// with a zero period.
		m.SetResourceVersion(cur.GetResourceVersion())
		if _, _, err := s.remove(gvr, ns, prev.DeepCopyObject()); err != nil {
			return true, nil, err
		}
		return true, obj, nil
	}
	m.SetResourceVersion(s.next())
	return s.commit(k8stesting.UpdateActionImpl{
		ActionImpl: k8stesting.ActionImpl{Namespace: ns, Verb: "update", Resource: gvr, Subresource: sub},
		Object:     obj,
	}, gvr, ns, "MODIFIED", obj, prev)
}

func (s *Server) delete(a k8stesting.DeleteActionImpl) (bool, runtime.Object, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	stored, err := s.tracker.Get(a.GetResource(), a.GetNamespace(), a.GetName())
	if err != nil {
		return true, nil, err
	}
	cur, err := meta.Accessor(stored)
	if err != nil {
		return true, nil, apierrors.NewBadRequest(err.Error())
	}
	if p := a.DeleteOptions.Preconditions; p != nil {
		if p.ResourceVersion != nil && *p.ResourceVersion != cur.GetResourceVersion() {
			return true, nil, conflict(a.GetResource(), a.GetName())
		}
		if p.UID != nil && *p.UID != cur.GetUID() {
			return true, nil, conflict(a.GetResource(), a.GetName())
		}
	}
	if period, ok := gracePeriod(stored, a.DeleteOptions.GracePeriodSeconds); ok {
		return s.deleteGracefully(a, stored, cur, period)
	}
	prev := stored.DeepCopyObject()
	if len(cur.GetFinalizers()) > 0 {
		if cur.GetDeletionTimestamp() != nil {
			return true, stored, nil // deletion already under way
		}
		// As the apiserver marks an object whose finalizers hold it: a
		// deletionTimestamp of now and a grace period of zero.
		now := s.now()
		cur.SetDeletionTimestamp(&now)
		cur.SetDeletionGracePeriodSeconds(ptr.To[int64](0))
		cur.SetResourceVersion(s.next())
		return s.commit(k8stesting.UpdateActionImpl{
			ActionImpl: k8stesting.ActionImpl{Namespace: a.GetNamespace(), Verb: "update", Resource: a.GetResource()},
			Object:     stored,
		}, a.GetResource(), a.GetNamespace(), "MODIFIED", stored, prev)
	}
	return s.remove(a.GetResource(), a.GetNamespace(), stored)
}

// remove deletes stored, a change with its own resourceVersion, which
// the DELETED event carries. The caller holds s.mu.
func (s *Server) remove(gvr schema.GroupVersionResource, ns string, stored runtime.Object) (bool, runtime.Object, error) {
	cur, err := meta.Accessor(stored)
	if err != nil {
		return true, nil, apierrors.NewBadRequest(err.Error())
	}
	prev := stored.DeepCopyObject()
	if err := s.tracker.Delete(gvr, ns, cur.GetName()); err != nil {
		return true, nil, err
	}
	cur.SetResourceVersion(s.next())
	s.record(gvr, ns, "DELETED", stored, prev)
	return true, nil, nil
}

// commit hands the stamped action to the tracker and records the change,
// whose previous state was prev (nil for a creation), for the watch cache.
func (s *Server) commit(a k8stesting.Action, gvr schema.GroupVersionResource, ns, typ string, obj, prev runtime.Object) (bool, runtime.Object, error) {
	handled, ret, err := s.react(a)
	if err != nil {
		return handled, ret, err
	}
	s.record(gvr, ns, typ, obj, prev)
	return handled, ret, nil
}

func conflict(gvr schema.GroupVersionResource, name string) error {
	return conflictWhy(gvr, name, "the object has been modified; please apply your changes to the latest version and try again")
}

func conflictWhy(gvr schema.GroupVersionResource, name, why string) error {
	return apierrors.NewConflict(gvr.GroupResource(), name, errors.New(why))
}

// invalid is the apiserver's 422 for a write that validation refuses.
func invalid(gr schema.GroupResource, name string, errs ...*field.Error) error {
	return apierrors.NewInvalid(schema.GroupKind{Group: gr.Group, Kind: gr.Resource}, name, errs)
}

// unchanged reports whether obj, written over prev, stores the same
// object: equal but for the resourceVersion, the type's apiVersion and
// kind, which a client may or may not send, and managedFields, whose
// timestamps the apiserver ignores when it judges a write a no-op (a
// patch's round trip through JSON truncates them to the second).
func unchanged(obj, prev runtime.Object) bool {
	// Both are the server's own copies, which nothing else sees while it
	// holds s.mu: they are compared bare and restored, not copied.
	defer bare(obj)()
	defer bare(prev)()
	return equality.Semantic.DeepEqual(obj, prev)
}

// bare clears o's apiVersion, kind, resourceVersion and managedFields, and
// returns the function that puts them back.
func bare(o runtime.Object) (restore func()) {
	kind := o.GetObjectKind()
	gvk := kind.GroupVersionKind()
	kind.SetGroupVersionKind(schema.GroupVersionKind{})
	m, err := meta.Accessor(o)
	if err != nil {
		return func() { kind.SetGroupVersionKind(gvk) }
	}
	rv, managed := m.GetResourceVersion(), m.GetManagedFields()
	m.SetResourceVersion("")
	m.SetManagedFields(nil)
	return func() {
		kind.SetGroupVersionKind(gvk)
		m.SetResourceVersion(rv)
		m.SetManagedFields(managed)
	}
}
