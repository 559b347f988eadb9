package backoff

import (
	"context"
	"errors"
	"fmt"
	"time"

	cbackoff "github.com/cenkalti/backoff/v4"
	"k8s.io/utils/clock"
)

// ErrGaveUp is wrapped, together with the operation's last error, by the
// error Retry returns when [WithMaxAttempts] or [WithMaxElapsedTime] stops it.
var ErrGaveUp = errors.New("backoff: gave up retrying")

// Retry calls op until it returns nil, and returns nil then. Between failed
// attempts it waits with exponential backoff: the first wait is the initial
// interval (100ms), and each further one is the previous one times the
// multiplier (1.5), capped at the max interval (30s), each randomized by the
// jitter factor (±20%). A retry-after hint in op's error replaces the
// computed wait (see [RetryAfter]).
//
// Retry stops early in these cases:
//   - op returns a [Permanent] error: Retry returns it (without the
//     permanent marker if op returned Permanent(err) directly);
//   - ctx ends: Retry returns ctx.Err() if op never ran, and otherwise an
//     error wrapping both ctx.Err() and op's last error;
//   - [WithMaxAttempts] or [WithMaxElapsedTime] is reached: Retry returns an
//     error wrapping [ErrGaveUp] and op's last error.
//
// There is no time limit by default. op runs on the caller's goroutine, is
// passed ctx, and is never called concurrently with itself. Invalid options
// make Retry return an error wrapping [ErrInvalidOption] without calling op.
func Retry(ctx context.Context, op func(context.Context) error, opts ...Option) error {
	o, err := newOptions(opts, DefaultQuietPeriod)
	if err != nil {
		return err
	}
	if op == nil {
		return fmt.Errorf("%w: nil operation", ErrInvalidOption)
	}
	if err := ctx.Err(); err != nil {
		return err
	}

	clk := o.clock
	// Built field by field rather than with cbackoff.NewExponentialBackOff so
	// that none of v4's defaults, in particular its 15-minute
	// MaxElapsedTime, is inherited. The elapsed-time limit is enforced below,
	// where it also covers retry-after hints.
	b := &cbackoff.ExponentialBackOff{
		InitialInterval:     o.initialInterval,
		RandomizationFactor: o.jitter,
		Multiplier:          o.multiplier,
		MaxInterval:         o.maxInterval,
		MaxElapsedTime:      0,
		Stop:                cbackoff.Stop,
		Clock:               clk,
	}
	b.Reset()

	start := clk.Now()
	rep := newReporter(ctx, o, start, "Operation failed, will retry")
	for attempt := 1; ; attempt++ {
		err := op(ctx)
		if err == nil {
			rep.success(attempt)
			return nil
		}
		if IsPermanent(err) {
			rep.permanent(err, attempt)
			return unwrapPermanent(err)
		}
		if ctx.Err() != nil {
			return rep.contextEnded(ctx, err, attempt)
		}
		if o.maxAttempts > 0 && attempt >= o.maxAttempts {
			return rep.gaveUp(err, attempt, fmt.Sprintf("after %d attempts", attempt))
		}

		wait := b.NextBackOff()
		if wait < 0 { // float overflow with an enormous max interval
			wait = o.maxInterval
		}
		if hint, ok := retryAfterHint(err); ok && o.maxRetryAfter > 0 {
			wait = min(max(hint, 0), o.maxRetryAfter)
		}
		if o.maxElapsedTime > 0 {
			if elapsed := clk.Since(start); elapsed+wait > o.maxElapsedTime {
				return rep.gaveUp(err, attempt, fmt.Sprintf("after %d attempts in %v; the next attempt would start after the limit of %v", attempt, elapsed, o.maxElapsedTime))
			}
		}

		rep.failure(err, attempt, wait)
		if wait <= 0 {
			continue
		}
		if sleep(ctx, clk, wait) != nil {
			return rep.contextEnded(ctx, err, attempt)
		}
	}
}

// sleep waits for d on clk, or until ctx ends, whichever comes first. It
// returns ctx.Err() in the second case. The timer is always released.
func sleep(ctx context.Context, clk clock.Clock, d time.Duration) error {
	t := clk.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
