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

// FuzzRecordAnnotation: whatever an operator leaves in a record Lease's
// value annotation, the record is never reported deleted (a nil or empty
// value without Corrupt, which the gate reads as the node gone): it is
// either the non-empty value the annotation decodes to, or a corrupt record (Corrupt wrapping
// versiongate.ErrCorruptRecord, naming the Lease), which the gate counts
// as a node of unknown release.
func FuzzRecordAnnotation(f *testing.F) {
	b, err := versiongate.EncodeNodeRelease("n1", versiongate.Version{Release: versiongate.Release{Major: 1}})
	require.NoError(f, err)
	f.Add(base64.StdEncoding.EncodeToString(b), true)
	f.Add("", true)
	f.Add("", false)
	f.Add("not base64!", true)
	f.Add("CgJuMQ", true)
	f.Add("CgJuMQ==\n", true)
	f.Add("=", true)
	f.Add("====", true)
	s, err := New(Config{Client: fake.NewClientset(), Namespace: "gates", Gate: "fuzz"})
	require.NoError(f, err)
	f.Fuzz(func(t *testing.T, value string, annotated bool) {
		l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{
			Name: "fuzz-n1", Namespace: "gates", ResourceVersion: "7",
			Labels: map[string]string{LabelGate: "fuzz", LabelRole: RoleRecord},
		}}
		if annotated {
			l.Annotations = map[string]string{AnnotationValue: value}
		}
		got := s.record("n1", l)
		require.Equal(t, "n1", got.ID)
		if got.Corrupt != nil {
			require.ErrorIs(t, got.Corrupt, versiongate.ErrCorruptRecord)
			require.Nil(t, got.Value)
			require.Contains(t, got.Corrupt.Error(), "gates/fuzz-n1")
			return
		}
		require.NotEmpty(t, got.Value, "a record read as deleted")
		// base64 skips line breaks and ignores the pad bits; otherwise the
		// value is the annotation's.
		want, err := base64.StdEncoding.DecodeString(strings.NewReplacer("\r", "", "\n", "").Replace(value))
		require.NoError(t, err)
		require.Equal(t, want, got.Value)
	})
}
