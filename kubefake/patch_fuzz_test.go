package kubefake_test

import (
	"context"
	"errors"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/reconkit/reconkit/kubefake"
)

// A patch is outside input: whatever its bytes, the server answers an
// API status error or a stored object, never panics, and never stores an
// object under another name or uid.
func FuzzPatch(f *testing.F) {
	for _, seed := range []struct {
		kind  uint8
		patch string
	}{
		{0, `[{"op":"test","path":"/metadata/resourceVersion","value":"1"},{"op":"replace","path":"/data/k","value":"v"}]`},
		{1, `{"data":{"k":"v"},"metadata":{"resourceVersion":"2"}}`},
		{2, `{"metadata":{"finalizers":["a/b"],"$deleteFromPrimitiveList/finalizers":["x"]}}`},
		{1, `{"metadata":{"uid":"x","name":"other"}}`},
		{0, `[{"op":"remove","path":"/metadata"}]`},
		{2, `{"$patch":"replace"}`},
		{1, `null`},
		{0, `{`},
	} {
		f.Add(seed.kind, []byte(seed.patch))
	}
	types := []types.PatchType{types.JSONPatchType, types.MergePatchType, types.StrategicMergePatchType}
	f.Fuzz(func(t *testing.T, kind uint8, patch []byte) {
		c := cm("a", map[string]string{"app": "x"})
		c.Data = map[string]string{"k": "0"}
		cs := kubefake.NewClientset(c)
		cms := cs.CoreV1().ConfigMaps(ns)
		ctx := context.Background()
		before, err := cms.Get(ctx, "a", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		got, err := cms.Patch(ctx, "a", types[int(kind)%len(types)], patch, metav1.PatchOptions{})
		if err != nil {
			var st apierrors.APIStatus
			if !errors.As(err, &st) {
				t.Fatalf("patch %q: %v is not an API status", patch, err)
			}
			return
		}
		if got.Name != "a" || got.UID != before.UID {
			t.Fatalf("patch %q stored %s/%s uid %s, want a with uid %s", patch, got.Namespace, got.Name, got.UID, before.UID)
		}
	})
}
