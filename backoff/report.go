package backoff

import (
	"context"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/utils/clock"
)

// reporter implements the quiet logging policy shared by Retry, Every and
// Poll.
// It is used from a single goroutine.
type reporter struct {
	log         logr.Logger
	clk         clock.PassiveClock
	name        string
	failMsg     string
	start       time.Time // first attempt; the quiet period runs from here
	quiet       time.Duration
	logInterval time.Duration

	lastLogged   time.Time // last failure logged at V(0); zero if none yet
	streak       int       // failures since the last success
	streakStart  time.Time // time of the first failure of the streak
	streakLogged bool      // whether a failure of the streak was logged at V(0)
	hintLogged   bool      // whether a capped retry-after hint was logged
}

func newReporter(ctx context.Context, o *options, start time.Time, failMsg string) *reporter {
	log := logr.FromContextOrDiscard(ctx)
	if o.name != "" {
		log = log.WithValues("operation", o.name)
	}
	return &reporter{
		log:         log,
		clk:         o.clock,
		name:        o.name,
		failMsg:     failMsg,
		start:       start,
		quiet:       o.quietPeriod,
		logInterval: o.logInterval,
	}
}

// failure records a failed attempt that will be followed by a wait.
func (r *reporter) failure(err error, attempt int, wait time.Duration) {
	now := r.clk.Now()
	if r.streak == 0 {
		r.streakStart = now
	}
	r.streak++
	kv := []any{"error", err, "attempt", attempt, "failingFor", now.Sub(r.streakStart), "nextIn", wait}
	if now.Sub(r.start) < r.quiet ||
		(!r.lastLogged.IsZero() && now.Sub(r.lastLogged) < r.logInterval) {
		r.log.V(1).Info(r.failMsg, kv...)
		return
	}
	r.log.Info(r.failMsg, kv...)
	r.lastLogged = now
	r.streakLogged = true
}

// success records a successful attempt and logs a recovery once per streak.
func (r *reporter) success(attempt int) {
	if r.streak == 0 {
		return
	}
	kv := []any{"attempt", attempt, "failures", r.streak, "failedFor", r.clk.Since(r.streakStart)}
	if r.streakLogged {
		r.log.Info("Operation succeeded after failures", kv...)
	} else {
		r.log.V(1).Info("Operation succeeded after failures", kv...)
	}
	r.streak = 0
	r.streakLogged = false
}

// permanent logs a permanent error once at error level.
func (r *reporter) permanent(err error, attempt int) {
	r.log.Error(unwrapPermanent(err), "Operation failed permanently, not retrying", "attempt", attempt)
}

// contextEnded builds Retry's error for a context that ended after op ran.
func (r *reporter) contextEnded(ctx context.Context, last error, attempts int) error {
	r.log.V(1).Info("Context ended, not retrying", "error", last, "attempt", attempts, "reason", ctx.Err())
	return fmt.Errorf("backoff: %s%w after %d attempts; last error: %w", r.prefix(), ctx.Err(), attempts, last)
}

// hintCapped logs, once per loop, that a retry-after hint was cut to the cap.
// r may be nil when no hint can occur.
func (r *reporter) hintCapped(hint, limit time.Duration) {
	if r == nil || r.hintLogged {
		return
	}
	r.hintLogged = true
	r.log.Info("Retry-after hint above the limit, waiting the limit instead", "hint", hint, "limit", limit)
}

// pollContextEnded builds Poll's error for a context that ended after cond
// ran; last is cond's last error, nil if it was only "not done".
func (r *reporter) pollContextEnded(ctx context.Context, last error, checks int) error {
	r.log.V(1).Info("Context ended, not polling again", "error", last, "checks", checks, "reason", ctx.Err())
	if last == nil {
		return fmt.Errorf("backoff: %snot done after %d checks: %w", r.prefix(), checks, ctx.Err())
	}
	return fmt.Errorf("backoff: %s%w after %d checks; last error: %w", r.prefix(), ctx.Err(), checks, last)
}

// pollGaveUp builds Poll's error for a timeout that passed.
func (r *reporter) pollGaveUp(last error, checks int, elapsed time.Duration) error {
	r.log.V(1).Info("Giving up", "error", last, "checks", checks, "elapsed", elapsed)
	if last == nil {
		return fmt.Errorf("%w%s: not done after %d checks in %v", ErrGaveUp, r.suffix(), checks, elapsed)
	}
	return fmt.Errorf("%w%s: not done after %d checks in %v; last error: %w", ErrGaveUp, r.suffix(), checks, elapsed, last)
}

// gaveUp builds Retry's error for an exhausted attempt or time limit.
func (r *reporter) gaveUp(last error, attempts int, detail string) error {
	r.log.V(1).Info("Giving up", "error", last, "attempt", attempts, "detail", detail)
	return fmt.Errorf("%w%s %s: %w", ErrGaveUp, r.suffix(), detail, last)
}

func (r *reporter) prefix() string {
	if r.name == "" {
		return ""
	}
	return fmt.Sprintf("%q: ", r.name)
}

func (r *reporter) suffix() string {
	if r.name == "" {
		return ""
	}
	return fmt.Sprintf(" on %q", r.name)
}
