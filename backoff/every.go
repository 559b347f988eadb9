package backoff

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"time"
)

// Every calls fn periodically until ctx ends or fn returns a [Permanent]
// error.
//
// The first call happens at once, or after one wait with [WithDelayedStart].
// Each wait is measured from the end of the previous call, so calls never
// overlap and a slow fn delays the next call rather than piling calls up.
// Each wait is interval plus a random extra drawn uniformly from
// [0, jitter*interval), so with jitter 0.1 and interval 10s calls are 10s to
// 11s apart. interval must be positive and jitter within [0, 1]; otherwise,
// or if an option is invalid, Every returns an error wrapping
// [ErrInvalidOption] without calling fn.
//
// An error from fn is logged, rate-limited by [WithLogInterval] (and
// [WithQuietPeriod], which defaults to 0 here), and the loop goes on. A
// [Permanent] error stops the loop and is returned (without the permanent
// marker if fn returned Permanent(err) directly). When ctx ends, Every returns
// ctx.Err(), after fn has returned if it was running.
//
// fn runs on the caller's goroutine and is passed ctx. Of the options, Every
// uses [WithClock], [WithName], [WithQuietPeriod], [WithLogInterval] and
// [WithDelayedStart]; the others configure Retry only but are validated.
func Every(ctx context.Context, interval time.Duration, jitter float64, fn func(context.Context) error, opts ...Option) error {
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
	o, err := newOptions(opts, 0)
	if err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	if err := ctx.Err(); err != nil {
		return err
	}

	clk := o.clock
	if o.delayedStart {
		if err := sleep(ctx, clk, jittered(interval, jitter)); err != nil {
			return err
		}
	}
	rep := newReporter(ctx, o, clk.Now(), "Periodic run failed")
	for run := 1; ; run++ {
		err := fn(ctx)
		if IsPermanent(err) {
			rep.permanent(err, run)
			return unwrapPermanent(err)
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		wait := jittered(interval, jitter)
		if err != nil {
			rep.failure(err, run, wait)
		} else {
			rep.success(run)
		}
		if err := sleep(ctx, clk, wait); err != nil {
			return err
		}
	}
}

// jittered returns interval plus a random extra in [0, jitter*interval),
// saturating instead of overflowing.
func jittered(interval time.Duration, jitter float64) time.Duration {
	if jitter == 0 {
		return interval
	}
	total := float64(interval) + rand.Float64()*jitter*float64(interval)
	if total >= math.MaxInt64 {
		return math.MaxInt64
	}
	return time.Duration(total)
}
