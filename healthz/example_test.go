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

// Install serves every check at /healthz and each alone at
// /healthz/<name>, so that a probe can watch one of them.
func ExampleHandler_Install() {
	h, err := healthz.New(
		healthz.Check{Name: "leaderElection", Checker: func(*http.Request) error { return nil }},
		healthz.Check{Name: "nodeHeartbeat", Checker: func(*http.Request) error {
			return errors.New("no heartbeat for 1m0s (bound 40s)")
		}},
	)
	if err != nil {
		fmt.Println(err)
		return
	}
	mux := http.NewServeMux()
	if err := h.Install(mux, "/healthz"); err != nil {
		fmt.Println(err)
		return
	}
	srv := httptest.NewServer(mux)
	defer srv.Close()

	for _, path := range []string{"/healthz/leaderElection", "/healthz/nodeHeartbeat", "/healthz/configTrial"} {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			fmt.Println(err)
			return
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Printf("%s: %d %s\n", path, resp.StatusCode, body)
	}
	// Output:
	// /healthz/leaderElection: 200 ok
	// /healthz/nodeHeartbeat: 500 [-]nodeHeartbeat failed: no heartbeat for 1m0s (bound 40s)
	// healthz check failed
	//
	// /healthz/configTrial: 404 healthz: no check named "configTrial"
}
