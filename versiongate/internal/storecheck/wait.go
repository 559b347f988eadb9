package storecheck

import (
	"testing"
	"time"
)

// stopWait bounds the wait for a goroutine the drivers started to end
// once told to: long enough for a loaded machine, short enough that a
// goroutine that never ends fails the test instead of hanging it.
const stopWait = 2 * time.Minute

// await waits for ch to deliver or close, marking t failed after stopWait
// (with Errorf, so that any goroutine may call it).
func await[T any](t testing.TB, ch <-chan T, what string) {
	t.Helper()
	tm := time.NewTimer(stopWait)
	defer tm.Stop()
	select {
	case <-ch:
	case <-tm.C:
		t.Errorf("storecheck: %s did not end within %v", what, stopWait)
	}
}
