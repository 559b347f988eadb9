package kubefake

import (
	"encoding/json"
	"fmt"
	"reflect"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
)

// applyJSONPatch applies p to doc. The JSON patch library panics on
// some malformed patches (a test operation with no value); the
// apiserver's handler recovers such a panic and answers 500, and so does
// this.
func applyJSONPatch(p jsonpatch.Patch, doc []byte) (out []byte, err error) {
	defer func() {
		if r := recover(); r != nil {
			out, err = nil, apierrors.NewInternalError(fmt.Errorf("json patch: %v", r))
		}
	}()
	return p.Apply(doc)
}

// applyPatch applies a JSON, merge or strategic merge patch to stored
// and returns the result as a new object, as the apiserver computes it
// before it checks the resourceVersion.
func applyPatch(stored runtime.Object, pt types.PatchType, patch []byte) (runtime.Object, error) {
	old, err := json.Marshal(stored)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	var modified []byte
	switch pt {
	case types.JSONPatchType:
		p, err := jsonpatch.DecodePatch(patch)
		if err != nil {
			return nil, apierrors.NewBadRequest("json patch: " + err.Error())
		}
		if modified, err = applyJSONPatch(p, old); err != nil {
			if apierrors.IsInternalError(err) {
				return nil, err
			}
			// A failed "test" operation, as a precondition on the
			// resourceVersion uses, is a 422 on the apiserver too.
			return nil, apierrors.NewInvalid(stored.GetObjectKind().GroupVersionKind().GroupKind(), "", nil)
		}
	case types.MergePatchType:
		if modified, err = jsonpatch.MergePatch(old, patch); err != nil {
			return nil, apierrors.NewBadRequest("merge patch: " + err.Error())
		}
	case types.StrategicMergePatchType:
		if modified, err = strategicpatch.StrategicMergePatch(old, patch, stored); err != nil {
			return nil, apierrors.NewBadRequest("strategic merge patch: " + err.Error())
		}
	default:
		return nil, apierrors.NewBadRequest("unsupported patch type " + string(pt))
	}
	// Decode into a fresh object: decoding over the old one would keep
	// the fields the patch removed.
	fresh, ok := reflect.New(reflect.TypeOf(stored).Elem()).Interface().(runtime.Object)
	if !ok {
		return nil, apierrors.NewInternalError(fmt.Errorf("kubefake: cannot make a new %T", stored))
	}
	if err := json.Unmarshal(modified, fresh); err != nil {
		return nil, apierrors.NewBadRequest("patched object: " + err.Error())
	}
	return fresh, nil
}
