package lease

import (
	"io"
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

// closeOnCleanup closes c when t ends, failing t if Close does not return
// within recvDeadline (its goroutine is then left behind; the test has
// failed) instead of hanging the binary.
func closeOnCleanup(t testing.TB, c io.Closer) {
	t.Cleanup(func() {
		done := make(chan struct{})
		go func() {
			defer close(done)
			_ = c.Close()
		}()
		select {
		case <-done:
		case <-time.After(recvDeadline):
			t.Errorf("Close did not return within %v", recvDeadline)
		}
	})
}
