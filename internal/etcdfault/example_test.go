package etcdfault_test

import (
	"fmt"
	"time"

	"github.com/reconkit/reconkit/internal/etcdfault"
)

// The persistent answers a budget test runs each loop under: a gRPC status
// for every request, a refused connection, or watches that end.
func ExamplePersistent() {
	for _, a := range etcdfault.Persistent() {
		switch {
		case a.Refused:
			fmt.Printf("%s: the proxy refuses connections\n", a.Name)
		case a.Watch != "":
			fmt.Printf("%s: every watch %s\n", a.Name, a.Watch)
		default:
			fmt.Printf("%s: every request answers %s\n", a.Name, a.Code)
		}
	}
	// Output:
	// Unavailable: every request answers Unavailable
	// ResourceExhausted: every request answers ResourceExhausted
	// PermissionDenied: every request answers PermissionDenied
	// Unauthenticated: every request answers Unauthenticated
	// DeadlineExceeded: every request answers DeadlineExceeded
	// connection refused: the proxy refuses connections
	// watch ends at once: every watch ends
	// compacted revision: every watch compacted
}

// What a budget test reads from an agent's counted requests (Requests
// within a window): each loop's rate, and the instants, which two agents
// must not share (jitter).
func ExampleRates() {
	reqs := []etcdfault.Request{
		{At: 31 * time.Second, Kind: "records"},
		{At: 40 * time.Second, Kind: "status"},
		{At: 52 * time.Second, Kind: "records"},
	}
	fmt.Println(etcdfault.Rates(etcdfault.PerKind(reqs), 60*time.Second))
	fmt.Println(etcdfault.Instants(reqs))
	// Output:
	// records 0.03/s, status 0.02/s
	// [31s 40s 52s]
}
