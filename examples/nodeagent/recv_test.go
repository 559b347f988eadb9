package main

import (
	"testing"
	"time"
)

// recv returns the next value from ch, failing the test when none comes
// within d: a receive in a test never waits without a bound.
func recv[T any](t *testing.T, ch <-chan T, d time.Duration, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(d):
		t.Fatalf("no %s within %v", what, d)
		panic("unreachable")
	}
}
