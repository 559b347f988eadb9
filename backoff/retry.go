package backoff

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	cbackoff "github.com/cenkalti/backoff/v4"
	"k8s.io/utils/clock"

	"github.com/reconkit/reconkit/internal/jitter"
)

// ErrGaveUp is wrapped, together with the operation's last error if there is
// one, by the error Retry returns when [WithMaxAttempts] or
// [WithMaxElapsedTime] stops it, and by the error Poll returns when its
// timeout passes.
var ErrGaveUp = errors.New("backoff: gave up retrying")

// Retry calls op until it returns nil, and returns nil then. Between failed
// attempts it waits with exponential backoff: the first wait is the initial
// interval (100ms), and each further one is the previous one times the
// multiplier (1.5), capped at the max interval (30s), each randomized by the
// jitter factor (±20%). A positive retry-after hint in op's error is a
// minimum: the next wait is the longer of the hint and the computed wait
// (see [RetryAfter]).
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
func Retry(ctx context.Context, op func(context.Context) error, opts ...RetryOption) error {
	o, err := retryOptions(opts)
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
	start := clk.Now()
	w := newWaits(o)
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
		wait := w.next(err, rep)
		if o.maxElapsedTime > 0 {
			if elapsed := clk.Since(start); elapsed+wait > o.maxElapsedTime {
				return rep.gaveUp(err, attempt, fmt.Sprintf("after %d attempts in %v; the next attempt would start after the limit of %v", attempt, elapsed, o.maxElapsedTime))
			}
		}
		rep.failure(err, attempt, wait)
		if sleep(ctx, clk, wait) != nil {
			return rep.contextEnded(ctx, err, attempt)
		}
	}
}

// waits computes the wait before each further attempt of Retry and Poll.
type waits struct {
	o *options
	b *cbackoff.ExponentialBackOff
}

func newWaits(o *options) *waits {
	// Built field by field rather than with cbackoff.NewExponentialBackOff so
	// that none of v4's defaults, in particular its 15-minute
	// MaxElapsedTime, is inherited. Time limits are enforced by the loops,
	// where they also cover retry-after hints. Its randomization is left
	// at zero, since it draws from math/rand's global source: next spreads
	// each wait the same way, from the loop's own source (WithRand).
	b := &cbackoff.ExponentialBackOff{
		InitialInterval:     o.initialInterval,
		RandomizationFactor: 0,
		Multiplier:          o.multiplier,
		MaxInterval:         o.maxInterval,
		MaxElapsedTime:      0,
		Stop:                cbackoff.Stop,
		Clock:               o.clock,
	}
	b.Reset()
	return &waits{o: o, b: b}
}

// next returns the wait after a call that returned err (nil for a poll that
// was not done). The exponential sequence advances on every call, hinted or
// not. A positive hint is a minimum: the wait is the longer of the computed
// one and the hinted one, so a server that says "1 s" to a loop already at
// a 30 s backoff does not bring its next attempt forward (client-go's REST
// client does the same: rest/with_retry.go takes the larger of its backoff
// and the Retry-After). The hinted wait is jittered upwards only, so the
// operation never runs before the hint asked and callers given the same
// hint do not all wake at the same instant. The cap bounds the hinted wait,
// jitter included: a hint within it waits from [hint, min(hint*(1+j),
// cap)], and a hint above it from [cap/(1+j), cap], which keeps such
// callers spread without a hint ever stalling them longer than the cap.
// A hint of zero or less asks for nothing and gets the computed wait: it
// is what a server that suggests "retry at once" (Kubernetes'
// ServerTimeout) says, and obeying it literally would spin.
func (w *waits) next(err error, rep *reporter) time.Duration {
	wait := jitter.Spread(w.o.rand, w.b.NextBackOff(), w.o.jitter)
	if wait < 0 { // float overflow with an enormous max interval
		wait = w.o.maxInterval
	}
	if err == nil || w.o.maxRetryAfter <= 0 {
		return wait
	}
	hint, ok := retryAfterHint(err)
	if !ok || hint <= 0 {
		return wait
	}
	return max(wait, hintedWait(w.o.rand, hint, w.o.maxRetryAfter, w.o.jitter, rep))
}

// hintedWait is the wait a positive hint asks for, jittered upwards by j
// and bounded by limit, jitter included (see waits.next), drawn from r.
func hintedWait(r func() float64, hint, limit time.Duration, j float64, rep *reporter) time.Duration {
	if hint > limit {
		rep.hintCapped(hint, limit)
		lo := time.Duration(float64(limit) / (1 + j))
		return lo + time.Duration(jitter.Float64(r)*float64(limit-lo))
	}
	return min(jitterUp(r, hint, j), limit)
}

// jitterUp draws a wait from r uniformly from [d, d*(1+j)], saturating.
func jitterUp(r func() float64, d time.Duration, j float64) time.Duration {
	if j == 0 {
		return d
	}
	total := float64(d) + jitter.Float64(r)*j*float64(d)
	if total >= math.MaxInt64 {
		return math.MaxInt64
	}
	return time.Duration(total)
}

// sleep waits for d on clk, or until ctx ends, whichever comes first. It
// returns ctx.Err() in the second case. The timer is always released.
func sleep(ctx context.Context, clk clock.Clock, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := clk.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
