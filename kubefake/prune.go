package kubefake

import (
	"encoding"
	"encoding/json"
	"reflect"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/structured-merge-diff/v6/value"
)

// The field manager's Update compares the stored object with the written
// one, field by field through reflection, to find what the write added,
// changed and removed; that walk over the whole object was most of the CPU
// a write cost, though a heartbeat changes a timestamp or two. Every path
// of the comparison depends on the two objects' values at that path
// alone, and two equal values add nothing to it: clearing, in both
// objects, a field both hold the same value of leaves the comparison as
// it was. So the field manager is handed copies of the two objects with
// their equal fields cleared, and the managedFields it computes are those
// of the whole objects.
//
// What the field manager reads besides comparing is kept as it is:
// apiVersion and kind, the managed fields themselves, the uid that tells
// a creation from an update, and the name and namespace its errors give
// (its other steps read annotations on apply only). Equality is
// Go's (reflect.DeepEqual), stricter than the comparison's (it tells a nil
// slice from an empty one), so a field is only ever cleared where the
// comparison would find nothing. Fields are cleared inside structs and
// structs behind pointers; lists and maps are compared whole (their items
// are matched by key, not by place), and so are types that convert
// themselves (quantities, times, raw extensions): such a value is cleared
// when it is equal, or kept whole.

// prunePair returns shallow copies of live, the stored object, and obj,
// the one written over it, with every field both hold an equal value of
// cleared, except the metadata readMeta names, apiVersion and kind; and
// false, with the two objects themselves, when they are not pointers to
// structs of one type that embeds ObjectMeta. The copies share what they did not clear with the originals, and
// the caller must not change it.
func prunePair(live, obj runtime.Object) (runtime.Object, runtime.Object, bool) {
	lv, nv := reflect.ValueOf(live), reflect.ValueOf(obj)
	if lv.Kind() != reflect.Pointer || lv.Type() != nv.Type() || lv.IsNil() || nv.IsNil() || lv.Elem().Kind() != reflect.Struct {
		return live, obj, false
	}
	t := lv.Elem().Type()
	if f, ok := t.FieldByName("ObjectMeta"); !ok || f.Type != objectMetaType || len(f.Index) != 1 {
		return live, obj, false // not a typed object: unstructured objects keep their metadata in a map
	}
	lc, nc := reflect.New(t), reflect.New(t)
	lc.Elem().Set(lv.Elem())
	nc.Elem().Set(nv.Elem())
	for i := range t.NumField() {
		f := t.Field(i)
		switch {
		case !f.IsExported() || f.Type == typeMetaType:
		case f.Type == objectMetaType:
			l, n := lc.Elem().Field(i), nc.Elem().Field(i)
			for j := range objectMetaType.NumField() {
				if g := objectMetaType.Field(j); g.IsExported() && !readMeta[g.Name] {
					prune(l.Field(j), n.Field(j))
				}
			}
		default:
			prune(lc.Elem().Field(i), nc.Elem().Field(i))
		}
	}
	lo, ok1 := lc.Interface().(runtime.Object)
	no, ok2 := nc.Interface().(runtime.Object)
	if !ok1 || !ok2 {
		return live, obj, false
	}
	return lo, no, true
}

var (
	typeMetaType   = reflect.TypeFor[metav1.TypeMeta]()
	objectMetaType = reflect.TypeFor[metav1.ObjectMeta]()
)

// readMeta are the fields of the metadata the field manager reads, beside
// comparing them: the managed fields, the uid that tells a creation from
// an update, and the name and namespace its errors give.
var readMeta = map[string]bool{"ManagedFields": true, "UID": true, "Name": true, "Namespace": true}

// prune clears l and n, two settable values of one type, when they are
// equal, and otherwise the equal fields within them, as far down as
// structs and pointers to structs go.
func prune(l, n reflect.Value) {
	if reflect.DeepEqual(l.Addr().Interface(), n.Addr().Interface()) {
		l.SetZero()
		n.SetZero()
		return
	}
	switch l.Kind() {
	case reflect.Struct:
		if whole(l.Type()) {
			return
		}
		for i := range l.NumField() {
			if l.Type().Field(i).IsExported() {
				prune(l.Field(i), n.Field(i))
			}
		}
	case reflect.Pointer:
		e := l.Type().Elem()
		if l.IsNil() || n.IsNil() || e.Kind() != reflect.Struct || whole(e) {
			return
		}
		// Copies, so that the fields cleared are the copies' own.
		lc, nc := reflect.New(e), reflect.New(e)
		lc.Elem().Set(l.Elem())
		nc.Elem().Set(n.Elem())
		l.Set(lc)
		n.Set(nc)
		prune(lc.Elem(), nc.Elem())
	}
}

var (
	jsonMarshaler = reflect.TypeFor[json.Marshaler]()
	textMarshaler = reflect.TypeFor[encoding.TextMarshaler]()
	unstructured  = reflect.TypeFor[value.UnstructuredConverter]()
)

// whole reports whether values of t convert themselves to what the field
// manager compares, rather than field by field: those are compared whole.
func whole(t reflect.Type) bool {
	p := reflect.PointerTo(t)
	for _, i := range []reflect.Type{jsonMarshaler, textMarshaler, unstructured} {
		if t.Implements(i) || p.Implements(i) {
			return true
		}
	}
	return false
}
