package etcdfault_test

import (
	"fmt"

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
