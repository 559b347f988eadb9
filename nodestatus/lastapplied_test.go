package nodestatus

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestLastAppliedRoundTrip(t *testing.T) {
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Labels:      map[string]string{"a": "b"},
			Annotations: map[string]string{"x/y": "z", AnnotationLastApplied: "old"},
		},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{
			Type: corev1.NodeReady, Status: corev1.ConditionTrue,
			LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now().Rfc3339Copy(),
		}}},
	}
	s, err := newLastApplied(n).encode()
	require.NoError(t, err)
	la, err := decodeLastApplied(s)
	require.NoError(t, err)
	require.Equal(t, map[string]string{"x/y": "z"}, la.Annotations, "its own annotation is not recorded")
	require.True(t, la.Status.Conditions[0].LastHeartbeatTime.IsZero(), "no heartbeat times")
	require.True(t, n.Status.Conditions[0].LastTransitionTime.Equal(&la.Status.Conditions[0].LastTransitionTime))
}

func TestDecodeLastAppliedRejects(t *testing.T) {
	for name, s := range map[string]string{
		"empty":            ``,
		"not json":         `{`,
		"wrong version":    `{"v":2,"status":{}}`,
		"no version":       `{"status":{}}`,
		"unknown field":    `{"v":1,"status":{},"spec":{}}`,
		"trailing":         `{"v":1,"status":{}} {}`,
		"bad label key":    `{"v":1,"labels":{"a b":"c"},"status":{}}`,
		"bad label value":  `{"v":1,"labels":{"a":"-x-"},"status":{}}`,
		"bad annotation":   `{"v":1,"annotations":{"":"c"},"status":{}}`,
		"self":             `{"v":1,"annotations":{"nodestatus.reconkit.io/last-applied":"c"},"status":{}}`,
		"untyped cond":     `{"v":1,"status":{"conditions":[{"status":"True"}]}}`,
		"duplicate cond":   `{"v":1,"status":{"conditions":[{"type":"Ready"},{"type":"Ready"}]}}`,
		"heartbeat stored": `{"v":1,"status":{"conditions":[{"type":"Ready","lastHeartbeatTime":"2030-01-01T00:00:00Z"}]}}`,
		"untyped address":  `{"v":1,"status":{"addresses":[{"address":"1.2.3.4"}]}}`,
		"bad quantity":     `{"v":1,"status":{"capacity":{"cpu":"lots"}}}`,
	} {
		t.Run(name, func(t *testing.T) {
			_, err := decodeLastApplied(s)
			require.ErrorIs(t, err, ErrInvalidLastApplied)
		})
	}
}

// FuzzDecodeLastApplied checks that any annotation value either fails with
// ErrInvalidLastApplied or decodes to a record that encodes and decodes to
// itself.
func FuzzDecodeLastApplied(f *testing.F) {
	f.Add(`{"v":1,"labels":{"a":"b"},"annotations":{"x/y":"z"},"status":{"conditions":[{"type":"Ready","status":"True","lastHeartbeatTime":null,"lastTransitionTime":"2030-01-01T00:00:00Z"}]}}`)
	f.Add(`{"v":1,"status":{"capacity":{"cpu":"2","memory":"1Gi"},"addresses":[{"type":"InternalIP","address":"10.0.0.1"}]}}`)
	f.Add(`{"v":1,"status":{}}`)
	f.Add(`{"v":0}`)
	f.Add(`null`)
	f.Add(`[]`)
	f.Fuzz(func(t *testing.T, s string) {
		la, err := decodeLastApplied(s)
		if err != nil {
			if !errors.Is(err, ErrInvalidLastApplied) {
				t.Fatalf("error does not wrap ErrInvalidLastApplied: %v", err)
			}
			return
		}
		enc, err := la.encode()
		if err != nil {
			t.Fatalf("a decoded record does not encode: %v", err)
		}
		again, err := decodeLastApplied(enc)
		if err != nil {
			t.Fatalf("a re-encoded record does not decode: %v\n%s", err, enc)
		}
		enc2, err := again.encode()
		if err != nil || enc2 != enc {
			t.Fatalf("not stable:\n%s\n%s", enc, enc2)
		}
		// The record always works as the original of a patch.
		if _, err := json.Marshal(la.node()); err != nil {
			t.Fatal(err)
		}
	})
}
