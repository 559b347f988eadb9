package kubefake

import (
	"fmt"
	"strconv"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/clock"
)

// server is the state behind one clientset's reactors.
type server struct {
	clock   clock.PassiveClock
	keep    int // changes kept in history
	tracker k8stesting.ObjectTracker
	react   k8stesting.ReactionFunc

	mu       sync.Mutex // orders every write, as etcd orders revisions
	rv       uint64     // the last resourceVersion handed out, across all resources
	history  []change   // the newest changes, oldest first
	compact  uint64     // a watch must start at or after this resourceVersion
	watchers map[*watcher]struct{}
}

func (s *server) next() string {
	s.rv++
	return strconv.FormatUint(s.rv, 10)
}

// stampNew sets what the apiserver sets on every new object.
func (s *server) stampNew(m metav1.Object) {
	if m.GetUID() == "" {
		m.SetUID(uuid.NewUUID())
	}
	if ts := m.GetCreationTimestamp(); ts.IsZero() {
		m.SetCreationTimestamp(s.now())
	}
}

func (s *server) now() metav1.Time {
	return metav1.NewTime(s.clock.Now().Truncate(time.Second))
}

func (s *server) handle(action k8stesting.Action) (bool, runtime.Object, error) {
	switch a := action.(type) {
	case k8stesting.CreateActionImpl:
		if a.GetSubresource() != "" {
			return false, nil, nil // eviction, token requests and the like: the tracker's behaviour
		}
		return s.create(a)
	case k8stesting.UpdateActionImpl:
		return s.update(a)
	case k8stesting.PatchActionImpl:
		return s.patch(a)
	case k8stesting.DeleteActionImpl:
		return s.delete(a)
	case k8stesting.ListActionImpl:
		return s.list(a)
	}
	return false, nil, nil
}

func (s *server) create(a k8stesting.CreateActionImpl) (bool, runtime.Object, error) {
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
		m.SetName(m.GetGenerateName() + string(uuid.NewUUID())[:5])
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
	return s.commit(a, a.GetResource(), a.GetNamespace(), "ADDED", obj)
}

func (s *server) update(a k8stesting.UpdateActionImpl) (bool, runtime.Object, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	obj := a.Object.DeepCopyObject()
	m, err := meta.Accessor(obj)
	if err != nil {
		return true, nil, apierrors.NewBadRequest(err.Error())
	}
	cur, err := s.current(a.GetResource(), a.GetNamespace(), m.GetName())
	if err != nil {
		return true, nil, err
	}
	if rv := m.GetResourceVersion(); rv != "" && rv != cur.GetResourceVersion() {
		return true, nil, conflict(a.GetResource(), m.GetName())
	}
	return s.write(a.GetResource(), a.GetNamespace(), a.GetSubresource(), obj, cur)
}

func (s *server) patch(a k8stesting.PatchActionImpl) (bool, runtime.Object, error) {
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
		return s.write(a.GetResource(), a.GetNamespace(), a.GetSubresource(), applied, cur)
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
	return s.write(a.GetResource(), a.GetNamespace(), a.GetSubresource(), obj, cur)
}

// applyCreate creates an object by server-side apply.
func (s *server) applyCreate(a k8stesting.PatchActionImpl) (bool, runtime.Object, error) {
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
	}, a.GetResource(), a.GetNamespace(), "ADDED", obj)
}

// write stores obj over cur with a new resourceVersion, keeping what a
// client cannot change, and finishes a deletion whose last finalizer the
// write removed.
func (s *server) write(gvr schema.GroupVersionResource, ns, sub string, obj runtime.Object, cur metav1.Object) (bool, runtime.Object, error) {
	m, _ := meta.Accessor(obj)
	m.SetUID(cur.GetUID())
	m.SetCreationTimestamp(cur.GetCreationTimestamp())
	m.SetDeletionTimestamp(cur.GetDeletionTimestamp())
	m.SetResourceVersion(s.next())
	if cur.GetDeletionTimestamp() != nil && len(m.GetFinalizers()) == 0 {
		if err := s.tracker.Delete(gvr, ns, m.GetName()); err != nil {
			return true, nil, err
		}
		s.record(gvr, ns, "DELETED", obj)
		return true, obj, nil
	}
	return s.commit(k8stesting.UpdateActionImpl{
		ActionImpl: k8stesting.ActionImpl{Namespace: ns, Verb: "update", Resource: gvr, Subresource: sub},
		Object:     obj,
	}, gvr, ns, "MODIFIED", obj)
}

func (s *server) delete(a k8stesting.DeleteActionImpl) (bool, runtime.Object, error) {
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
	if len(cur.GetFinalizers()) > 0 {
		if cur.GetDeletionTimestamp() != nil {
			return true, stored, nil // deletion already under way
		}
		now := s.now()
		cur.SetDeletionTimestamp(&now)
		cur.SetResourceVersion(s.next())
		return s.commit(k8stesting.UpdateActionImpl{
			ActionImpl: k8stesting.ActionImpl{Namespace: a.GetNamespace(), Verb: "update", Resource: a.GetResource()},
			Object:     stored,
		}, a.GetResource(), a.GetNamespace(), "MODIFIED", stored)
	}
	if err := s.tracker.Delete(a.GetResource(), a.GetNamespace(), a.GetName()); err != nil {
		return true, nil, err
	}
	// A deletion is a change with its own resourceVersion, which the
	// DELETED event carries.
	cur.SetResourceVersion(s.next())
	s.record(a.GetResource(), a.GetNamespace(), "DELETED", stored)
	return true, nil, nil
}

func (s *server) list(a k8stesting.ListActionImpl) (bool, runtime.Object, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, obj, err := s.react(a)
	if err != nil {
		return true, nil, err
	}
	if err := filterFields(obj, a.GetListRestrictions().Fields); err != nil {
		return true, nil, err
	}
	if lm, lerr := meta.ListAccessor(obj); lerr == nil {
		lm.SetResourceVersion(strconv.FormatUint(s.rv, 10))
	}
	return true, obj, nil
}

// filterFields keeps the items of list that match sel on metadata.name
// and metadata.namespace, as the apiserver does for every resource;
// client-go's tracker applies no field selector on List.
func filterFields(list runtime.Object, sel fields.Selector) error {
	if sel == nil || sel.Empty() {
		return nil
	}
	items, err := meta.ExtractList(list)
	if err != nil {
		return err
	}
	kept := items[:0]
	for _, it := range items {
		m, err := meta.Accessor(it)
		if err != nil {
			return err
		}
		if sel.Matches(fields.Set{"metadata.name": m.GetName(), "metadata.namespace": m.GetNamespace()}) {
			kept = append(kept, it)
		}
	}
	return meta.SetList(list, kept)
}

func (s *server) current(gvr schema.GroupVersionResource, ns, name string) (metav1.Object, error) {
	obj, err := s.tracker.Get(gvr, ns, name)
	if err != nil {
		return nil, err
	}
	return meta.Accessor(obj)
}

// commit hands the stamped action to the tracker and records the change
// for watches.
func (s *server) commit(a k8stesting.Action, gvr schema.GroupVersionResource, ns, typ string, obj runtime.Object) (bool, runtime.Object, error) {
	handled, ret, err := s.react(a)
	if err != nil {
		return handled, ret, err
	}
	s.record(gvr, ns, typ, obj)
	return handled, ret, nil
}

func conflict(gvr schema.GroupVersionResource, name string) error {
	return apierrors.NewConflict(gvr.GroupResource(), name,
		fmt.Errorf("the object has been modified; please apply your changes to the latest version and try again"))
}
