package backoff

import (
	"errors"
	"time"

	cbackoff "github.com/cenkalti/backoff/v4"
)

// Permanent marks err as not worth retrying: Retry and Every stop at once.
// Retry and Every return err itself when the operation returns the result of
// Permanent directly, and the operation's error unchanged when it wrapped the
// result further (errors.Is and errors.As see through both). Permanent(nil)
// returns nil.
//
// The marker is cenkalti/backoff/v4's *PermanentError, so errors marked by
// that package directly are recognised too.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &cbackoff.PermanentError{Err: err}
}

// IsPermanent reports whether err, or any error it wraps, was marked by
// [Permanent].
func IsPermanent(err error) bool {
	var p *cbackoff.PermanentError
	return errors.As(err, &p)
}

// unwrapPermanent strips a top-level permanent marker.
func unwrapPermanent(err error) error {
	if p, ok := err.(*cbackoff.PermanentError); ok {
		return p.Err
	}
	return err
}

// RetryAfter returns err annotated with a hint that the next attempt should
// happen after d instead of the computed backoff. Retry clamps the hint to
// [0, max retry-after] (see [WithMaxRetryAfter]). The result wraps err, and
// exposes the hint through a RetryAfter() time.Duration method. RetryAfter(nil,
// d) returns nil.
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

// retryAfterHinter is implemented by errors that suggest a wait before the
// next attempt.
type retryAfterHinter interface {
	RetryAfter() time.Duration
}

// retryAfterHint returns the first hint in err's chain.
func retryAfterHint(err error) (time.Duration, bool) {
	var h retryAfterHinter
	if errors.As(err, &h) {
		return h.RetryAfter(), true
	}
	return 0, false
}
