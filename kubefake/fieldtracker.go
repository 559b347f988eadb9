package kubefake

import (
	"reflect"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/meta/testrestmapper"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/client-go/applyconfigurations"
	"k8s.io/client-go/kubernetes/scheme"
	k8stesting "k8s.io/client-go/testing"
	"sigs.k8s.io/structured-merge-diff/v6/typed"
	"sigs.k8s.io/structured-merge-diff/v6/value"
)

// fieldTracker writes to the store of client-go's field-managed object
// tracker as that tracker does, with the same field managers, but builds
// its REST mapper and each kind's field manager once instead of on every
// write. client-go's tracker builds a static REST mapper of every type in
// the scheme for each Create, Update and Patch, which was most of the CPU
// a long simulation spent. Its answers are the tracker's: the object
// stored, managedFields included, is what the same field manager makes of
// the same inputs.
//
// Server-side apply is left to the managed tracker itself (Apply). Reads
// and deletions go to the store, which both share.
type fieldTracker struct {
	k8stesting.ObjectTracker // the store: the managed tracker's own

	managed k8stesting.ObjectTracker // for Apply
	mapper  meta.RESTMapper
	conv    managedfields.TypeConverter

	untracked map[schema.GroupResource]bool // Config.UntrackedFields

	mu       sync.Mutex
	kinds    map[schema.GroupVersionResource]schema.GroupVersionKind
	managers map[schema.GroupVersionKind]*managedfields.FieldManager
}

// newFieldTracker returns a fieldTracker over the store of managed, a
// tracker made by k8stesting.NewFieldManagedObjectTracker (as
// fake.NewClientset makes it), and false when managed does not have the
// shape that tracker has had (it embeds its store), so that the caller
// keeps using managed itself. Writes to the resources untracked names keep
// no managedFields.
func newFieldTracker(managed k8stesting.ObjectTracker, untracked ...schema.GroupResource) (*fieldTracker, bool) {
	v := reflect.ValueOf(managed)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return nil, false
	}
	f := v.Elem().FieldByName("ObjectTracker")
	if !f.IsValid() || !f.CanInterface() {
		return nil, false
	}
	store, ok := f.Interface().(k8stesting.ObjectTracker)
	if !ok || store == nil {
		return nil, false
	}
	skip := map[schema.GroupResource]bool{}
	for _, gr := range untracked {
		skip[gr] = true
	}
	return &fieldTracker{
		untracked:     skip,
		ObjectTracker: store,
		managed:       managed,
		mapper:        testrestmapper.TestOnlyStaticRESTMapper(scheme.Scheme),
		conv:          &unvalidated{conv: applyconfigurations.NewTypeConverter(scheme.Scheme), types: map[schema.GroupVersionKind]*typed.TypedValue{}},
		kinds:         map[schema.GroupVersionResource]schema.GroupVersionKind{},
		managers:      map[schema.GroupVersionKind]*managedfields.FieldManager{},
	}, true
}

// manager returns the field manager of the resource gvr, as
// NewFieldManagedObjectTracker's fieldManagerFor builds it, and the kind
// the REST mapper names for gvr; both are kept after the first write of a
// resource.
func (t *fieldTracker) manager(gvr schema.GroupVersionResource) (schema.GroupVersionKind, *managedfields.FieldManager, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	gvk, ok := t.kinds[gvr]
	if !ok {
		var err error
		if gvk, err = t.mapper.KindFor(gvr); err != nil {
			return gvk, nil, err
		}
		t.kinds[gvr] = gvk
	}
	if m, ok := t.managers[gvk]; ok {
		return gvk, m, nil
	}
	m, err := managedfields.NewDefaultFieldManager(t.conv, scheme.Scheme, noDefaults{}, scheme.Scheme, gvk, gvk.GroupVersion(), "", nil)
	if err != nil {
		return gvk, nil, err
	}
	t.managers[gvk] = m
	return gvk, m, nil
}

// unvalidated is client-go's type converter (applyconfigurations') without
// the schema validation of every typed object it converts, which was most
// of the field manager's CPU. A typed object of the scheme cannot have a
// field of the wrong type, and the field manager converts with duplicates
// allowed: keyed lists with duplicate items, items whose key is empty or
// left to its default get the answers client-go's converter gives
// (TestFieldTrackerAnswersAsTheManagedTracker). Unstructured objects are
// converted, and validated, by client-go's converter.
type unvalidated struct {
	conv managedfields.TypeConverter

	mu    sync.Mutex
	types map[schema.GroupVersionKind]*typed.TypedValue // an empty object of each kind, for its schema and type
}

func (u *unvalidated) ObjectToTyped(obj runtime.Object, opts ...typed.ValidationOptions) (*typed.TypedValue, error) {
	if _, ok := obj.(runtime.Unstructured); ok {
		return u.conv.ObjectToTyped(obj, opts...)
	}
	gvk := obj.GetObjectKind().GroupVersionKind()
	u.mu.Lock()
	empty, ok := u.types[gvk]
	u.mu.Unlock()
	if !ok {
		o, err := scheme.Scheme.New(gvk)
		if err != nil {
			return u.conv.ObjectToTyped(obj, opts...) // its error
		}
		o.GetObjectKind().SetGroupVersionKind(gvk)
		if empty, err = u.conv.ObjectToTyped(o, opts...); err != nil {
			return nil, err
		}
		u.mu.Lock()
		u.types[gvk] = empty
		u.mu.Unlock()
	}
	v, err := value.NewValueReflect(withoutManagedFields(obj))
	if err != nil {
		return nil, err
	}
	//lint:ignore SA1019 validation is still most of the field manager's CPU (see the type's comment)
	return typed.AsTypedUnvalidated(v, empty.Schema(), empty.TypeRef()), nil
}

// withoutManagedFields returns obj, or when it has managedFields a shallow
// copy of it without them. The field manager removes them from the new
// object before it converts it, and those of the stored object only add
// paths under metadata.managedFields to what the comparison of the two
// finds removed, which the field manager strips from every manager's set:
// converting them was a walk through JSON for nothing.
func withoutManagedFields(obj runtime.Object) runtime.Object {
	m, err := meta.Accessor(obj)
	if err != nil || len(m.GetManagedFields()) == 0 {
		return obj
	}
	v := reflect.ValueOf(obj)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return obj
	}
	c := reflect.New(v.Elem().Type())
	c.Elem().Set(v.Elem())
	cp, ok := c.Interface().(runtime.Object)
	if !ok {
		return obj
	}
	cm, err := meta.Accessor(cp)
	if err != nil {
		return obj
	}
	cm.SetManagedFields(nil)
	return cp
}

func (u *unvalidated) TypedToObject(v *typed.TypedValue) (runtime.Object, error) {
	return u.conv.TypedToObject(v)
}

// noDefaults defaults nothing, as the managed tracker's defaulter does.
type noDefaults struct{}

func (noDefaults) Default(runtime.Object) {}

// Create stores obj as a new object, with the managedFields its field
// manager gives it, as the managed tracker's Create does.
func (t *fieldTracker) Create(gvr schema.GroupVersionResource, obj runtime.Object, ns string, opts ...metav1.CreateOptions) error {
	if len(opts) > 1 {
		return t.managed.Create(gvr, obj, ns, opts...) // its error
	}
	o := only(opts)
	managed, err := t.track(gvr, obj, ns, o.FieldManager, true)
	if err != nil {
		return err
	}
	return t.ObjectTracker.Create(gvr, managed, ns, o)
}

// Update stores obj over the object of its name, as the managed tracker's
// Update does.
func (t *fieldTracker) Update(gvr schema.GroupVersionResource, obj runtime.Object, ns string, opts ...metav1.UpdateOptions) error {
	if len(opts) > 1 {
		return t.managed.Update(gvr, obj, ns, opts...)
	}
	o := only(opts)
	managed, err := t.track(gvr, obj, ns, o.FieldManager, false)
	if err != nil {
		return err
	}
	return t.ObjectTracker.Update(gvr, managed, ns, o)
}

// Patch stores obj, the patched object, over the object of its name, as
// the managed tracker's Patch does.
func (t *fieldTracker) Patch(gvr schema.GroupVersionResource, obj runtime.Object, ns string, opts ...metav1.PatchOptions) error {
	if len(opts) > 1 {
		return t.managed.Patch(gvr, obj, ns, opts...)
	}
	managed, err := t.track(gvr, obj, ns, only(opts).FieldManager, false)
	if err != nil {
		return err
	}
	return t.ObjectTracker.Patch(gvr, managed, ns, opts...)
}

// only returns the one option given, or the zero options.
func only[T any](opts []T) T {
	var o T
	if len(opts) == 1 {
		o = opts[0]
	}
	return o
}

// track returns obj with the managedFields the resource's field manager
// gives a write of it by manager over the stored object of its name: the
// one path of Create, Update and Patch. A creation stamps obj's apiVersion
// and kind, and starts from an empty object when none is stored; an update
// or a patch needs the stored object.
func (t *fieldTracker) track(gvr schema.GroupVersionResource, obj runtime.Object, ns, manager string, create bool) (runtime.Object, error) {
	gvk, mgr, err := t.manager(gvr)
	if err != nil {
		return nil, err
	}
	if create {
		typ, err := meta.TypeAccessor(obj)
		if err != nil {
			return nil, err
		}
		apiVersion, kind := gvk.ToAPIVersionAndKind()
		typ.SetAPIVersion(apiVersion)
		typ.SetKind(kind)
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return nil, err
	}
	if t.untracked[gvr.GroupResource()] {
		m.SetManagedFields(nil) // Config.UntrackedFields
		return obj, nil
	}
	live, err := t.ObjectTracker.Get(gvr, ns, m.GetName(), metav1.GetOptions{})
	if create && apierrors.IsNotFound(err) {
		if live, err = scheme.Scheme.New(gvk); err != nil {
			return nil, err
		}
		live.GetObjectKind().SetGroupVersionKind(gvk)
	} else if err != nil {
		return nil, err
	}
	if create {
		return mgr.Update(live, obj, manager)
	}
	// An update or a patch: the field manager compares copies of the two
	// objects without what they share (see prunePair), and obj takes the
	// managedFields it computes.
	pl, po, ok := prunePair(live, obj)
	if !ok {
		return mgr.Update(live, obj, manager)
	}
	out, err := mgr.Update(pl, po, manager)
	if err != nil {
		return nil, err
	}
	om, err := meta.Accessor(out)
	if err != nil {
		return nil, err
	}
	m.SetManagedFields(om.GetManagedFields())
	return obj, nil
}

// Apply is server-side apply: the managed tracker's.
func (t *fieldTracker) Apply(gvr schema.GroupVersionResource, obj runtime.Object, ns string, opts ...metav1.PatchOptions) error {
	return t.managed.Apply(gvr, obj, ns, opts...)
}
