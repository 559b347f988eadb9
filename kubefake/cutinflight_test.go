package kubefake

import (
	"context"
	"errors"
	"net/url"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	k8stesting "k8s.io/client-go/testing"
)

// A request that passed the cut check is still in flight when Cut returns:
// it lands on a cut link, so it fails as a refused connection and nothing
// it asked for happens.
func TestCutRefusesRequestInFlight(t *testing.T) {
	srv := Config{}.NewServer()
	c := srv.NewClient()
	held, release := make(chan struct{}), make(chan struct{})
	c.landing = func(a k8stesting.Action) {
		if a.GetVerb() == "create" {
			close(held)
			<-release
		}
	}
	obj := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "in-flight"}}
	var wg sync.WaitGroup
	defer wg.Wait()
	var err error
	wg.Go(func() {
		_, err = c.CoreV1().ConfigMaps("default").Create(context.Background(), obj, metav1.CreateOptions{})
	})
	<-held
	c.Cut()
	close(release)
	wg.Wait()

	var ue *url.Error
	if !errors.As(err, &ue) || !utilnet.IsConnectionRefused(err) {
		t.Errorf("create in flight at the cut: %v (%T), want a *url.Error with ECONNREFUSED", err, err)
	}
	if got, gerr := srv.Tracker().Get(corev1.SchemeGroupVersion.WithResource("configmaps"), "default", "in-flight"); !apierrors.IsNotFound(gerr) {
		t.Errorf("a create in flight at the cut was stored (%v, %v)", got, gerr)
	}
}
