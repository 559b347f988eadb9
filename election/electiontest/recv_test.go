package electiontest_test

import (
	"testing"
	"time"
)

// recvDeadline bounds every wait of these tests for something the fake
// must do, so that a missed step fails instead of hanging.
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
