package lease

import (
	"testing"
	"time"
)

// recvDeadline bounds, in real time, every wait of this package's tests
// for something the code under test must do, so that a missed step fails
// with a message instead of hanging until the test binary's timeout.
const recvDeadline = 30 * time.Second

// recv returns the next value of ch, failing the test if none comes within
// recvDeadline.
func recv[T any](t testing.TB, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(recvDeadline):
		t.Fatalf("waited %v for %s", recvDeadline, what)
		var zero T
		return zero
	}
}
