package backoff

import (
	"errors"
	"time"

	cbackoffv4 "github.com/cenkalti/backoff/v4"
	cbackoffv5 "github.com/cenkalti/backoff/v5"
)

// Permanent marks err as one that retrying cannot fix: [Retry], [Every] and
// [Poll] stop at once when an operation returns it, and return err itself
// (without the marker) when the operation returned Permanent(err) directly.
// The marker survives wrapping with %w. Permanent(nil) is nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanentError{err: err}
}

// permanentError is the marker Permanent adds. It satisfies the interface
// IsPermanent looks for, so hosts can also mark their own error types.
type permanentError struct{ err error }

func (e *permanentError) Error() string   { return e.err.Error() }
func (e *permanentError) Unwrap() error   { return e.err }
func (e *permanentError) Permanent() bool { return true }

// permanentMarker is the contract IsPermanent checks: any error in the chain
// with a method Permanent() bool that returns true.
type permanentMarker interface{ Permanent() bool }

// IsPermanent reports whether err's chain holds a permanent marker: one made
// by [Permanent], any value with a method Permanent() bool that returns true,
// or a *PermanentError of github.com/cenkalti/backoff v4 or v5, so errors
// marked for either major version of that library are recognised too.
func IsPermanent(err error) bool {
	if err == nil {
		return false
	}
	var m permanentMarker
	if errors.As(err, &m) && m.Permanent() {
		return true
	}
	var p4 *cbackoffv4.PermanentError
	if errors.As(err, &p4) {
		return true
	}
	var p5 *cbackoffv5.PermanentError
	return errors.As(err, &p5)
}

// unwrapPermanent removes a permanent marker at the top of err, so that a
// caller who returned Permanent(err) gets err back.
func unwrapPermanent(err error) error {
	switch p := err.(type) {
	case *permanentError:
		return p.err
	case *cbackoffv4.PermanentError:
		return p.Err
	case *cbackoffv5.PermanentError:
		return p.Err
	}
	return err
}

// RetryAfter returns an error that wraps err and asks for a wait of d before
// the next attempt (see "Retry-after hints" in the package documentation).
// RetryAfter(nil, d) is nil.
func RetryAfter(err error, d time.Duration) error {
	if err == nil {
		return nil
	}
	return &retryAfterError{err: err, after: d}
}

type retryAfterError struct {
	err   error
	after time.Duration
}

func (e *retryAfterError) Error() string             { return e.err.Error() }
func (e *retryAfterError) Unwrap() error             { return e.err }
func (e *retryAfterError) RetryAfter() time.Duration { return e.after }

type retryAfterHinter interface {
	RetryAfter() time.Duration
}

// retryAfterHint returns the first retry-after hint in err's chain: a value
// with a method RetryAfter() time.Duration, or a *RetryAfterError of
// github.com/cenkalti/backoff/v5.
func retryAfterHint(err error) (time.Duration, bool) {
	var h retryAfterHinter
	if errors.As(err, &h) {
		return h.RetryAfter(), true
	}
	var h5 *cbackoffv5.RetryAfterError
	if errors.As(err, &h5) {
		return h5.Duration, true
	}
	return 0, false
}
