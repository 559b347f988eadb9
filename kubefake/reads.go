package kubefake

import (
	"fmt"
	"sort"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stesting "k8s.io/client-go/testing"
)

// get serves a GET: from the store when it names no resourceVersion
// (a linearizable read), from the watch cache otherwise.
func (s *Server) get(a k8stesting.GetActionImpl) (bool, runtime.Object, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	fromCache, err := s.readCache(a.GetResource(), a.GetOptions.ResourceVersion)
	if err != nil {
		return true, nil, err
	}
	if !fromCache {
		return s.react(a)
	}
	obj, err := s.cachedGet(a.GetResource(), a.GetNamespace(), a.GetName())
	return true, obj, err
}

func (s *Server) list(a k8stesting.ListActionImpl) (bool, runtime.Object, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	gvr := a.GetResource()
	sel, err := fieldSelector(gvr.GroupResource(), a.GetListRestrictions().Fields)
	if err != nil {
		return true, nil, err
	}
	fromCache, err := s.readCache(gvr, a.ListOptions.ResourceVersion)
	if err != nil {
		return true, nil, err
	}
	_, obj, err := s.react(a)
	if err != nil {
		return true, nil, err
	}
	rv := s.rv
	if fromCache {
		if err := s.cachedList(obj, gvr, a.GetNamespace()); err != nil {
			return true, nil, apierrors.NewInternalError(err)
		}
		rv = s.cacheRV(gvr)
	}
	if err := filterFields(obj, sel); err != nil {
		return true, nil, err
	}
	if lm, lerr := meta.ListAccessor(obj); lerr == nil {
		lm.SetResourceVersion(strconv.FormatUint(rv, 10))
	}
	return true, obj, nil
}

// readCache reports whether a read that names resourceVersion rv is
// served from the watch cache, as the apiserver serves it: "" is a
// linearizable read from the store, "0" is whatever the cache holds, and
// a number is a read not older than it. The apiserver waits (3s) for its
// cache to reach a newer number than it holds, then answers 504 Too large
// resource version; here the cache catches up at once unless it is
// paused, and a number past the newest write is refused at once. The
// caller holds s.mu.
func (s *Server) readCache(gvr schema.GroupVersionResource, rv string) (bool, error) {
	switch rv {
	case "":
		return false, nil
	case "0":
		return true, nil
	}
	n, err := strconv.ParseUint(rv, 10, 64)
	if err != nil {
		return false, apierrors.NewBadRequest(fmt.Sprintf("invalid resourceVersion %q", rv))
	}
	have := s.cacheRV(gvr)
	if n <= have {
		return true, nil
	}
	if s.paused || n > s.rv {
		return false, tooLargeResourceVersion(n, have)
	}
	s.applyThrough(gvr, n)
	return true, nil
}

// tooLargeResourceVersion is the apiserver's answer to a read newer than
// its cache reached in time: 504, with a cause naming it.
func tooLargeResourceVersion(want, have uint64) error {
	err := apierrors.NewTimeoutError(fmt.Sprintf("Too large resource version: %d, current: %d", want, have), 1)
	err.ErrStatus.Details.Causes = []metav1.StatusCause{{Type: metav1.CauseTypeResourceVersionTooLarge, Message: "Too large resource version"}}
	return err
}

// cachedGet returns the object as the watch cache holds it: as it was
// before the first change to it the cache has not applied, or as stored
// when there is none. The caller holds s.mu.
func (s *Server) cachedGet(gvr schema.GroupVersionResource, ns, name string) (runtime.Object, error) {
	for _, c := range s.pending[gvr] {
		if c.ns == ns && c.name == name {
			if c.prev == nil {
				return nil, apierrors.NewNotFound(gvr.GroupResource(), name)
			}
			return c.prev.DeepCopyObject(), nil
		}
	}
	return s.tracker.Get(gvr, ns, name)
}

// cachedList turns the store's list of gvr in ns ("" for all) into the
// watch cache's: every object with a change the cache has not applied is
// replaced by its state before that change. The caller holds s.mu.
func (s *Server) cachedList(list runtime.Object, gvr schema.GroupVersionResource, ns string) error {
	pending := s.pending[gvr]
	if len(pending) == 0 {
		return nil
	}
	items, err := meta.ExtractList(list)
	if err != nil {
		return err
	}
	type key struct{ ns, name string }
	keyOf := func(o runtime.Object) (key, error) {
		m, err := meta.Accessor(o)
		if err != nil {
			return key{}, err
		}
		return key{m.GetNamespace(), m.GetName()}, nil
	}
	byKey := map[key]runtime.Object{}
	for _, it := range items {
		k, err := keyOf(it)
		if err != nil {
			return err
		}
		byKey[k] = it
	}
	seen := map[key]bool{}
	for _, c := range pending {
		k := key{c.ns, c.name}
		if (ns != "" && c.ns != ns) || seen[k] {
			continue
		}
		seen[k] = true
		delete(byKey, k)
		if c.prev != nil {
			byKey[k] = c.prev.DeepCopyObject()
		}
	}
	keys := make([]key, 0, len(byKey))
	for k := range byKey {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].ns != keys[j].ns {
			return keys[i].ns < keys[j].ns
		}
		return keys[i].name < keys[j].name
	})
	kept := make([]runtime.Object, 0, len(keys))
	for _, k := range keys {
		kept = append(kept, byKey[k])
	}
	return meta.SetList(list, kept)
}

// filterFields keeps the items of list that match sel, as the apiserver
// does (see fieldSet); client-go's tracker applies no field selector on
// List.
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
		if sel.Matches(fieldSet(it)) {
			kept = append(kept, it)
		}
	}
	return meta.SetList(list, kept)
}
