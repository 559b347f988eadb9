package healthz_test

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"

	"github.com/reconkit/reconkit/healthz"
)

// A host names the checks of the packages it runs (here stand-ins for
// elector.HealthCheck(grace).Check, controller.HeartbeatCheck(bound),
// gate.RecordCheck(grace) and config.TrialCheck(grace)) and serves them
// on /healthz.
func Example() {
	h, err := healthz.New(
		healthz.Check{Name: "leaderElection", Checker: func(*http.Request) error { return nil }},
		healthz.Check{Name: "nodeHeartbeat", Checker: func(*http.Request) error {
			return errors.New("no heartbeat for 1m0s (bound 40s)")
		}},
		healthz.Check{Name: "releaseRecord", Checker: func(*http.Request) error { return nil }},
		healthz.Check{Name: "configTrial", Checker: func(*http.Request) error { return nil }},
	)
	if err != nil {
		fmt.Println(err)
		return
	}
	mux := http.NewServeMux()
	mux.Handle("GET /healthz", h)
	srv := httptest.NewServer(mux)
	defer srv.Close()

	for _, q := range []string{"", "?exclude=nodeHeartbeat"} {
		resp, err := http.Get(srv.URL + "/healthz" + q)
		if err != nil {
			fmt.Println(err)
			return
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Printf("%d\n%s\n", resp.StatusCode, body)
	}
	// Output:
	// 500
	// [+]leaderElection ok
	// [-]nodeHeartbeat failed: no heartbeat for 1m0s (bound 40s)
	// [+]releaseRecord ok
	// [+]configTrial ok
	// healthz check failed
	//
	// 200
	// ok
}
