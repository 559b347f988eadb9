package lease_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"k8s.io/client-go/kubernetes/fake"

	"github.com/reconkit/reconkit/election"
	"github.com/reconkit/reconkit/election/lease"
)

// A leadership health check served on /healthz (here through httptest and
// a fake clientset, so the example runs offline). It is healthy while the
// candidate does not lead or leads within ValidUntil + grace, as client-go's
// HealthzAdaptor; hc.Check is also a controller-runtime healthz.Checker:
//
//	mgr.AddHealthzCheck(hc.Name(), hc.Check)
//
// Observations and events go to the hooks of the configuration.
func ExampleElector_HealthCheck() {
	e, err := lease.New(lease.Config{
		Client:    fake.NewClientset(),
		Namespace: "kube-system",
		Name:      "my-controller",
		Identity:  "node-a",
		Metrics: election.MetricsFunc(func(o election.Observation) {
			if o.Event != election.EventRenewed { // renewals are too many to print
				fmt.Println("observed:", o.Event, o.Token)
			}
		}),
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	hc := e.HealthCheck(20 * time.Second)
	mux := http.NewServeMux()
	mux.Handle("/healthz", hc)
	get := func() {
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
		fmt.Printf("GET /healthz: %d %s", rec.Code, rec.Body)
	}

	get()
	ctx := context.Background()
	l, err := e.Campaign(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	get()
	_ = l.Resign(ctx)
	_ = e.Close()
	get()
	// Output:
	// GET /healthz: 200 ok
	// observed: acquired 1
	// GET /healthz: 200 ok
	// observed: resigned 1
	// GET /healthz: 200 ok
}
