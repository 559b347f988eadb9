package backoff

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Poll calls cond until it reports done, and returns nil then. It calls cond
// at once (after one interval with [WithDelayedStart]) and waits interval
// between calls; [WithMultiplier] makes the waits grow up to
// [WithMaxInterval], and [WithJitter] spreads them.
//
// cond's error decides what happens next, whatever it says of done:
//   - a [Permanent] error ends Poll, which returns it (without the marker if
//     cond returned Permanent(err) directly);
//   - any other error is transient: Poll logs it as Retry does (quietly at
//     first, see the package documentation) and calls cond again after the
//     next wait, or after the error's retry-after hint if it has a positive
//     one that is longer (a hint is a minimum; see [RetryAfter]).
//
// Poll gives up when timeout has passed since the first call, measured on
// the injected clock: the last wait is shortened so that cond is called once
// more at the deadline, and if that call is not done either Poll returns an
// error wrapping [ErrGaveUp] and cond's last error, if any. A timeout of zero
// means no limit. When ctx ends, Poll returns ctx.Err() if cond never ran,
// and otherwise an error wrapping ctx.Err() and cond's last error, if any.
//
// A result of "not done" is not a failure: it is not logged and does not
// count as one. cond runs on the caller's goroutine, is passed ctx, and is
// never called concurrently with itself. Invalid arguments or options make
// Poll return an error wrapping [ErrInvalidOption] without calling cond.
func Poll(ctx context.Context, interval, timeout time.Duration, cond func(ctx context.Context) (done bool, err error), opts ...PollOption) error {
	var errs []error
	if interval <= 0 {
		errs = append(errs, fmt.Errorf("%w: interval %v must be positive", ErrInvalidOption, interval))
	}
	if timeout < 0 {
		errs = append(errs, fmt.Errorf("%w: timeout %v must not be negative", ErrInvalidOption, timeout))
	}
	if cond == nil {
		errs = append(errs, fmt.Errorf("%w: nil condition", ErrInvalidOption))
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	o, err := pollOptions(interval, opts)
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}

	clk := o.clock
	w := newWaits(o)
	if o.delayedStart {
		if err := sleep(ctx, clk, w.next(nil, nil)); err != nil {
			return err
		}
	}
	start := clk.Now()
	rep := newReporter(ctx, o, start, "Condition check failed, will poll again")
	var last error // cond's last error; nil after a clean "not done"
	for check := 1; ; check++ {
		done, err := cond(ctx)
		switch {
		case err == nil && done:
			rep.success(check)
			return nil
		case IsPermanent(err):
			rep.permanent(err, check)
			return unwrapPermanent(err)
		}
		last = err
		if ctx.Err() != nil {
			return rep.pollContextEnded(ctx, last, check)
		}
		wait := w.next(err, rep)
		if timeout > 0 {
			elapsed := clk.Since(start)
			if elapsed >= timeout {
				return rep.pollGaveUp(last, check, elapsed)
			}
			wait = min(wait, timeout-elapsed)
		}
		if err != nil {
			rep.failure(err, check, wait)
		} else if rep.streak > 0 {
			rep.success(check) // the error cleared, though not done yet
		}
		if sleep(ctx, clk, wait) != nil {
			return rep.pollContextEnded(ctx, last, check)
		}
	}
}
