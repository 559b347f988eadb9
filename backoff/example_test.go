package backoff_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/reconkit/reconkit/backoff"
)

// Retry an operation that fails twice before it succeeds.
func ExampleRetry() {
	attempts := 0
	err := backoff.Retry(context.Background(), func(ctx context.Context) error {
		attempts++
		if attempts < 3 {
			return errors.New("apiserver not ready")
		}
		return nil
	}, backoff.WithInitialInterval(time.Millisecond), backoff.WithName("initial reconciliation"))
	fmt.Println(err, attempts)
	// Output: <nil> 3
}

// A permanent error stops retrying at once and is returned as is.
func ExamplePermanent() {
	errInvalid := errors.New("invalid spec")
	attempts := 0
	err := backoff.Retry(context.Background(), func(ctx context.Context) error {
		attempts++
		return backoff.Permanent(errInvalid)
	})
	fmt.Println(errors.Is(err, errInvalid), attempts)
	// Output: true 1
}

// Run a periodic job until it decides to stop by returning a permanent error.
func ExampleEvery() {
	errDone := errors.New("done")
	runs := 0
	err := backoff.Every(context.Background(), time.Millisecond, 0.1, func(ctx context.Context) error {
		runs++
		if runs == 3 {
			return backoff.Permanent(errDone)
		}
		return nil
	})
	fmt.Println(err, runs)
	// Output: done 3
}

// Poll waits for an asynchronous operation, here a load balancer that a
// provider reports as pending for its first two checks. A failed check is
// retried; only a Permanent error or the timeout ends the wait early.
func ExamplePoll() {
	checks := 0
	status := func(ctx context.Context) (state string, err error) {
		checks++
		if checks < 3 {
			return "PENDING", nil
		}
		return "ACTIVE", nil
	}
	err := backoff.Poll(context.Background(), time.Millisecond, time.Minute, func(ctx context.Context) (bool, error) {
		state, err := status(ctx)
		if err != nil {
			return false, err
		}
		if state == "FAILED" {
			return false, backoff.Permanent(errors.New("load balancer failed"))
		}
		return state == "ACTIVE", nil
	}, backoff.WithName("load balancer active"))
	fmt.Println(err, checks)
	// Output: <nil> 3
}
