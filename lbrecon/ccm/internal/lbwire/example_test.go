package lbwire_test

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cloud-provider/api"

	"github.com/reconkit/reconkit/lbrecon/ccm/internal/lbwire"
)

// A call crosses to the load balancer behind a Handler and its answer comes
// back: a RetryError keeps its delay.
func Example() {
	lb := &fake{status: &v1.LoadBalancerStatus{Ingress: []v1.LoadBalancerIngress{{IP: "192.0.2.10"}}}}
	srv := httptest.NewServer(lbwire.Handler(lb))
	defer srv.Close()
	c := &lbwire.Client{URL: srv.URL, HTTP: srv.Client()}

	svc := &v1.Service{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "uid-1"}}
	nodes := []*v1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}}
	st, err := c.EnsureLoadBalancer(context.Background(), "kubernetes", svc, nodes)
	fmt.Println(st.Ingress[0].IP, err, lb.gotNode[0].Name)

	lb.err = api.NewRetryError("the load balancer is still being created", 10*time.Second)
	_, err = c.EnsureLoadBalancer(context.Background(), "kubernetes", svc, nodes)
	var retry *api.RetryError
	if errors.As(err, &retry) {
		fmt.Println(retry.RetryAfter())
	}
	// Output:
	// 192.0.2.10 <nil> n1
	// 10s
}
