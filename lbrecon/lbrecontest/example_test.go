package lbrecontest_test

import (
	"context"
	"fmt"

	"github.com/reconkit/reconkit/lbrecon"
	"github.com/reconkit/reconkit/lbrecon/lbrecontest"
)

// Inject a fault, observe it, and count calls.
func Example() {
	ctx := context.Background()
	e := lbrecontest.New(lbrecontest.Config{})
	e.FailCreate(nil, 1, nil)

	obj := lbrecon.Object{Kind: lbrecon.KindBackend, Name: "http.svc-1", Tags: []string{"owner=svc-1"},
		Spec: lbrecon.BackendSpec{LoadBalancer: "lb-1"}}
	_, err := e.Create(ctx, obj)
	fmt.Println("first create:", err)
	created, err := e.Create(ctx, obj)
	fmt.Println("second create:", created.ID, created.State, err)
	fmt.Println("calls:", e.Calls()[lbrecon.VerbCreate])
	// Output:
	// first create: lbrecontest: injected fault: create failed
	// second create: id-000001 ok <nil>
	// calls: 2
}
