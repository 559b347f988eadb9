package kubefake_test

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/reconkit/reconkit/kubefake"
)

// A List with a field selector returns only the objects it selects, as the
// apiserver's does: the Lease elector finds its Lease by name this way, and
// took another Lease of the namespace when the fake returned them all.
func TestListAppliesFieldAndLabelSelectors(t *testing.T) {
	cs := kubefake.Config{}.NewClientset()
	ctx := context.Background()
	for _, c := range []struct {
		name   string
		labels map[string]string
	}{{"a", map[string]string{"role": "x"}}, {"b", map[string]string{"role": "x"}}, {"c", nil}} {
		if _, err := cs.CoreV1().ConfigMaps(ns).Create(ctx, cm(c.name, c.labels), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		opts metav1.ListOptions
		want []string
	}{
		{metav1.ListOptions{FieldSelector: "metadata.name=b"}, []string{"b"}},
		{metav1.ListOptions{FieldSelector: "metadata.name!=b"}, []string{"a", "c"}},
		{metav1.ListOptions{FieldSelector: "metadata.namespace=elsewhere"}, nil},
		{metav1.ListOptions{LabelSelector: "role=x", FieldSelector: "metadata.name=a"}, []string{"a"}},
		{metav1.ListOptions{LabelSelector: "role=x"}, []string{"a", "b"}},
		{metav1.ListOptions{}, []string{"a", "b", "c"}},
	} {
		l, err := cs.CoreV1().ConfigMaps(ns).List(ctx, tc.opts)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, it := range l.Items {
			got = append(got, it.Name)
		}
		if len(got) != len(tc.want) {
			t.Fatalf("List(%+v) = %v, want %v", tc.opts, got, tc.want)
		}
		for i := range got {
			if got[i] != tc.want[i] {
				t.Fatalf("List(%+v) = %v, want %v", tc.opts, got, tc.want)
			}
		}
		if l.ResourceVersion == "" {
			t.Fatalf("List(%+v) has no resourceVersion", tc.opts)
		}
	}
}
