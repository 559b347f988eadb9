package fleetsim

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// appObjects are a LoadBalancer Service and a ConfigMap in namespace app.
func appObjects() []runtime.Object {
	return []runtime.Object{
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "web"}, Spec: corev1.ServiceSpec{
			Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{{Port: 80, NodePort: 30080}}}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "settings"}},
	}
}

// ServiceChange deletes the Service or changes its type, and puts it back:
// by the end an agent finds it as it was.
func TestServiceChange(t *testing.T) {
	var end atomic.Value
	agent := func(ctx context.Context, d Deps) error {
		<-ctx.Done()
		if d.Index == 0 { // after the quiet period, on a client that lasts
			svc, err := d.Kube.Server().NewClient().CoreV1().Services("app").Get(context.Background(), "web", metav1.GetOptions{})
			if err == nil {
				end.Store(string(svc.Spec.Type))
			}
		}
		return nil
	}
	r := simulate(t, Config{Agent: agent, Agents: 1, Objects: appObjects(), Duration: 10 * time.Minute, Quiet: time.Minute,
		Nemesis: Nemesis{}.Only(ServiceChange)})
	if err := r.Err(); err != nil {
		t.Fatal(err)
	}
	tl := Window(r.Timeline, 0, 0, time.Hour)
	if !strings.Contains(tl, "delete Service app/web") || !strings.Contains(tl, "type LoadBalancer -> ClusterIP") {
		t.Errorf("the nemesis neither deleted the Service nor changed its type:\n%s", tl)
	}
	if got := end.Load(); got != string(corev1.ServiceTypeLoadBalancer) {
		t.Errorf("the Service's type at the end is %v, want LoadBalancer", got)
	}
}

// NamespaceDelete empties the namespace and refuses creations in it for a
// while; then its objects are back.
func TestNamespaceDelete(t *testing.T) {
	var forbidden, missing atomic.Int64
	agent := func(ctx context.Context, d Deps) error {
		cms := d.Kube.CoreV1().ConfigMaps("app")
		for sleepCtx(ctx, 5*time.Second) {
			_, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: d.Name}}, metav1.CreateOptions{})
			if apierrors.IsForbidden(err) {
				forbidden.Add(1)
			}
			if _, err := cms.Get(ctx, "settings", metav1.GetOptions{}); apierrors.IsNotFound(err) {
				missing.Add(1)
			}
		}
		return nil
	}
	r := simulate(t, Config{Agent: agent, Agents: 1, Objects: appObjects(), Duration: 10 * time.Minute, Quiet: time.Minute,
		Nemesis: Nemesis{}.Only(NamespaceDelete)})
	if err := r.Err(); err != nil {
		t.Fatal(err)
	}
	if forbidden.Load() == 0 || missing.Load() == 0 {
		t.Errorf("%d creations refused and %d reads found the ConfigMap gone, want some of each", forbidden.Load(), missing.Load())
	}
	if !strings.Contains(Window(r.Timeline, 0, 0, time.Hour), "namespace app created again") {
		t.Error("the namespace was never created again")
	}
}
