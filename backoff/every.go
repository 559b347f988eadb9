package backoff

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Every calls fn at once and then again interval after each run has
// returned, until ctx ends or fn returns a [Permanent] error. Each wait is
// drawn uniformly from [interval, interval*(1+jitter)], so that many
// processes started together spread out; jitter must be within [0, 1].
// [WithDelayedStart] makes it wait before the first run too.
//
// A failed run is logged (see the package documentation) and the loop goes
// on after the same interval, unless [WithFailureBackoff] is given: then
// failures in a row make the waits grow, with jitter, until a run succeeds.
// Without it Every ignores retry-after hints. Every returns nil when ctx ends, as every Run of this module does
// (a loop asked to stop has not failed), and fn's error (without the
// permanent marker) when fn returns a Permanent error, even if ctx ended
// meanwhile. fn runs on the
// caller's goroutine and is passed ctx; runs never overlap. Invalid
// arguments or options make Every return an error wrapping
// [ErrInvalidOption] without calling fn.
func Every(ctx context.Context, interval time.Duration, jitter float64, fn func(context.Context) error, opts ...EveryOption) error {
	var errs []error
	if interval <= 0 {
		errs = append(errs, fmt.Errorf("%w: interval %v must be positive", ErrInvalidOption, interval))
	}
	if !(jitter >= 0 && jitter <= 1) {
		errs = append(errs, fmt.Errorf("%w: jitter %v must be within [0, 1]", ErrInvalidOption, jitter))
	}
	if fn == nil {
		errs = append(errs, fmt.Errorf("%w: nil function", ErrInvalidOption))
	}
	o, err := everyOptions(opts)
	if err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	if ctx.Err() != nil {
		return nil
	}

	clk := o.clock
	if o.delayedStart {
		if sleep(ctx, clk, jitterUp(o.rand, interval, jitter)) != nil {
			return nil // ctx ended
		}
	}
	rep := newReporter(ctx, o, clk.Now(), "Periodic run failed")
	var fw *waits // the failure backoff, with WithFailureBackoff
	if o.failureSet {
		fw = newWaits(failureOptions(o, interval))
	}
	for run := 1; ; run++ {
		err := fn(ctx)
		if IsPermanent(err) {
			rep.permanent(err, run)
			return unwrapPermanent(err)
		}
		if ctx.Err() != nil {
			return nil
		}
		wait := jitterUp(o.rand, interval, jitter)
		switch {
		case err == nil:
			if fw != nil {
				fw.b.Reset()
			}
			rep.success(run)
		case fw != nil:
			wait = max(wait, fw.next(err, rep))
			rep.failure(err, run, wait)
		default:
			rep.failure(err, run, wait)
		}
		if sleep(ctx, clk, wait) != nil {
			return nil // ctx ended
		}
	}
}

// failureOptions returns the options of Every's failure backoff: waits
// from 1.5 × interval growing by DefaultMultiplier to the cap,
// DefaultJitter, hints honoured up to DefaultMaxRetryAfter.
func failureOptions(o *options, interval time.Duration) *options {
	fo := *o
	fo.maxInterval = max(o.failureMax, interval)
	fo.initialInterval = min(interval+interval/2, fo.maxInterval)
	if fo.initialInterval < interval { // overflow
		fo.initialInterval = fo.maxInterval
	}
	fo.multiplier = DefaultMultiplier
	fo.jitter = DefaultJitter
	fo.maxRetryAfter = DefaultMaxRetryAfter
	return &fo
}
