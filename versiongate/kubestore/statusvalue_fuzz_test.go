package kubestore

import (
	"encoding/base64"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/reconkit/reconkit/versiongate"
)

// FuzzStatusAnnotation: whatever an operator leaves in the status Lease's
// value annotation, reading it never fails and never panics: it is either
// a value whose base64 is the annotation (line breaks aside), or a corrupt
// status (Corrupt wrapping versiongate.ErrCorruptStatus, Value nil), which
// the gate blocks on and its leader repairs. What the value decodes to is
// versiongate.DecodeStatus's to judge (FuzzDecodeStatus there).
func FuzzStatusAnnotation(f *testing.F) {
	st := versiongate.Status{State: versiongate.StateDone, Version: versiongate.Version{Release: versiongate.Release{Major: 1, Minor: 2}}, MinimumCompatibleRelease: versiongate.Release{Major: 1}}
	b, err := st.Encode()
	require.NoError(f, err)
	f.Add(base64.StdEncoding.EncodeToString(b))
	f.Add("")
	f.Add("not base64!")
	f.Add("CAIS")
	f.Add("CAIS\n")
	f.Add("=")
	s, err := New(Config{Client: fake.NewClientset(), Namespace: "gates", Gate: "fuzz"})
	require.NoError(f, err)
	f.Fuzz(func(t *testing.T, value string) {
		l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{
			Name: "fuzz-status", Namespace: "gates", ResourceVersion: "7",
			Labels:      map[string]string{LabelGate: "fuzz", LabelRole: RoleStatus},
			Annotations: map[string]string{AnnotationValue: value},
		}}
		got, err := s.stored(l)
		require.NoError(t, err)
		require.Equal(t, int64(7), got.Revision)
		require.False(t, got.FirstBoot, "a Lease with a value annotation is no first boot")
		if got.Corrupt != nil {
			require.ErrorIs(t, got.Corrupt, versiongate.ErrCorruptStatus)
			require.Nil(t, got.Value)
			require.Contains(t, got.Corrupt.Error(), "gates/fuzz-status")
			return
		}
		require.NotNil(t, got.Value)
		// base64 skips line breaks; otherwise the value is the annotation's.
		require.Equal(t, strings.NewReplacer("\r", "", "\n", "").Replace(value), base64.StdEncoding.EncodeToString(got.Value))
		if _, err := versiongate.DecodeStatus(got.Value); err != nil {
			require.ErrorIs(t, err, versiongate.ErrCorruptStatus)
		}
	})
}
