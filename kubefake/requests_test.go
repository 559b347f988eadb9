package kubefake_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/reconkit/reconkit/kubefake"
)

// Each client counts its own requests by verb, resource and
// subresource, whatever their answers; requests a prepended reactor
// answers are never sent and do not count.
func TestClientRequests(t *testing.T) {
	srv := kubefake.Config{}.NewServer()
	a, b := srv.NewClient(), srv.NewClient()
	ctx := context.Background()
	cms := a.CoreV1().ConfigMaps(ns)
	if _, err := cms.Create(ctx, cm("x", nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	before := a.Requests()
	_, _ = cms.Get(ctx, "x", metav1.GetOptions{})
	_, _ = cms.Get(ctx, "missing", metav1.GetOptions{}) // a 404 counts
	_, _ = a.CoreV1().Pods(ns).UpdateStatus(ctx, pod("p", ""), metav1.UpdateOptions{})
	w, err := cms.Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w.Stop()
	a.Cut()
	_, _ = cms.List(ctx, metav1.ListOptions{}) // refused, still sent
	a.Heal()
	a.PrependReactor("get", "secrets", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, nil
	})
	_, _ = a.CoreV1().Secrets(ns).Get(ctx, "s", metav1.GetOptions{}) // never sent
	_, _ = b.CoreV1().ConfigMaps(ns).Get(ctx, "x", metav1.GetOptions{})

	got := a.Requests().Sub(before)
	want := kubefake.Requests{
		{Verb: "get", Resource: "configmaps"}:                     2,
		{Verb: "update", Resource: "pods", Subresource: "status"}: 1,
		{Verb: "watch", Resource: "configmaps"}:                   1,
		{Verb: "list", Resource: "configmaps"}:                    1,
	}
	if len(got) != len(want) || got.Total() != 5 {
		t.Fatalf("requests %v, want %v", got, want)
	}
	for k, n := range want {
		if got[k] != n {
			t.Fatalf("requests %v, want %v", got, want)
		}
	}
	if n := b.Requests().Total(); n != 1 {
		t.Fatalf("the other client counted %d requests, want its own 1", n)
	}
	if a.Requests()[kubefake.Request{Verb: "create", Resource: "configmaps"}] != 1 {
		t.Fatal("a snapshot lost the requests before it")
	}
}

func pod(name, node string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
	}
}
