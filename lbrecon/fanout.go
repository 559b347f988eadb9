package lbrecon

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/reconkit/reconkit/backoff"
)

// engineList lists the owned objects once; ErrNotFound from the engine
// means nothing matched. It also returns when the call started and its
// number: the listing shows every write made ListLag before then, and
// every write that returned before the listing numbered ListLagListings
// below it started.
func (r *Reconciler) engineList(ctx context.Context) ([]Object, listing, error) {
	at := listing{at: r.clock.Now(), n: r.listings.Add(1)}
	objs, err := r.cfg.Engine.List(ctx, Query{Tag: r.cfg.Tag, Scope: r.cfg.Scope})
	if errors.Is(err, ErrNotFound) {
		return nil, at, nil
	}
	return objs, at, err
}

// list calls Engine.List with retries, and returns the listing and when
// its successful call started (see engineList).
func (r *Reconciler) list(ctx context.Context) ([]Object, listing, error) {
	var objs []Object
	var at listing
	err := r.call(ctx, VerbList, func(ctx context.Context) error {
		var err error
		objs, at, err = r.engineList(ctx)
		return err
	})
	if err != nil {
		return nil, listing{}, fmt.Errorf("lbrecon: list: %w", err)
	}
	return objs, at, nil
}

// errCallTimeout ends an engine call that took longer than CallTimeout.
var errCallTimeout = fmt.Errorf("lbrecon: engine call took longer than Config.CallTimeout: %w", context.DeadlineExceeded)

// errPassTimeout ends a call of one pass that was still running when the
// pass had run for CallTimeout. Like any timeout, it leaves the call's
// outcome unknown (a Create holds its name, as after a lost answer).
var errPassTimeout = fmt.Errorf("lbrecon: the pass ran out of its Config.CallTimeout: %w", context.DeadlineExceeded)

// once makes one engine call, within CallTimeout on the clock (and, in
// one pass, within what is left of the pass's), and reports it to the
// metrics. A call not started for lack of time is not reported.
func (r *Reconciler) once(ctx context.Context, verb Verb, fn func(context.Context) error) error {
	t := r.clock.Now()
	err := r.bounded(ctx, fn)
	if !errors.Is(err, errNoTime) {
		r.metrics.Observe(verb, classify(err), r.clock.Since(t))
	}
	return err
}

// bounded calls fn with a context that ends CallTimeout from now on the
// clock, or, inside one pass, when the pass has run for CallTimeout if
// that comes first; an error of a call that ran out of time wraps
// errCallTimeout or errPassTimeout. Inside one pass it returns errNoTime
// without calling fn when less than the floor (see budgetLeft) is left.
func (r *Reconciler) bounded(ctx context.Context, fn func(context.Context) error) error {
	limit, cause := r.cfg.CallTimeout, errCallTimeout
	if left, ok := r.passLeft(ctx); ok {
		if left < r.callFloor() {
			return errNoTime
		}
		if left < limit {
			limit, cause = left, errPassTimeout
		}
	}
	cctx, cancel := context.WithCancelCause(ctx)
	timer := r.clock.NewTimer(limit)
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		select {
		case <-timer.C():
			cancel(cause)
		case <-cctx.Done():
		}
	}()
	err := fn(cctx)
	timedOut := context.Cause(cctx) == cause
	timer.Stop()
	cancel(nil)
	<-ended
	if timedOut && err != nil && ctx.Err() == nil {
		err = fmt.Errorf("%w after %v: %w", cause, limit, err)
	}
	return err
}

// answer is an engine error that is an answer rather than a failure: it
// ends the call without a retry and without an error log.
func answer(err error) bool {
	return errors.Is(err, ErrNotFound) || errors.Is(err, ErrNotSupported) ||
		errors.Is(err, ErrAlreadyExists) || errors.Is(err, ErrConflict)
}

// call makes an engine call, retrying transient and rate-limited failures
// within RetryBudget (and CallAttempts when set). Answers (not found, not
// supported, already exists, conflict) and permanent errors are final. A
// Create is retried only when rate limited or sent with an idempotency
// token (resendable): after any other failure it may have created the
// object, and the next listing tells.
//
// Inside one pass of ReconcileOnce or TeardownOnce (see onePass) it makes
// one attempt: the host's next call is the retry.
func (r *Reconciler) call(ctx context.Context, verb Verb, fn func(context.Context) error) error {
	if isOnePass(ctx) {
		return r.once(ctx, verb, fn)
	}
	var final error
	opts := []backoff.RetryOption{
		backoff.WithClock(r.clock),
		backoff.WithRand(r.rand),
		backoff.WithMaxElapsedTime(r.cfg.RetryBudget),
		backoff.WithInitialInterval(r.cfg.RetryInterval),
		backoff.WithName("lbrecon: " + string(verb)),
	}
	if r.cfg.CallAttempts > 0 {
		opts = append(opts, backoff.WithMaxAttempts(r.cfg.CallAttempts))
	}
	err := backoff.Retry(ctx, func(ctx context.Context) error {
		err := r.once(ctx, verb, fn)
		var hint interface{ RetryAfter() time.Duration }
		switch {
		case err == nil:
			return nil
		case answer(err), backoff.IsPermanent(err), errors.Is(err, ErrFenced):
			// Final, and kept as it is (Retry would strip the marker).
			final = err
			return nil
		case verb == VerbCreate && !errors.As(err, &hint) && !errors.As(err, new(resendable)) && !backoff.IsPermanent(err) && ctx.Err() == nil:
			final = err
			return nil
		}
		return err
	}, opts...)
	if err != nil {
		return err
	}
	return final
}

type onePassKey struct{}

// onePass marks ctx as the context of one non-blocking pass that started
// at start: engine calls are made once, a failure a wait may cure is left
// to the host's next call instead of being retried on the clock, and
// every call ends by the time the pass has run for CallTimeout (see
// passLeft and budgetLeft).
func onePass(ctx context.Context, start time.Time) context.Context {
	return context.WithValue(ctx, onePassKey{}, start)
}

func isOnePass(ctx context.Context) bool { return ctx.Value(onePassKey{}) != nil }

// errNoTime is the result of a call of one pass not sent because too
// little of the pass's CallTimeout was left: the next call makes it.
var errNoTime = errors.New("lbrecon: not sent: too little of the pass's Config.CallTimeout left")

// minCallShare sets the floor of a call of one pass: a call starts only
// with at least CallTimeout/minCallShare of the pass left, since a call
// cut shorter would mostly end with an unknown outcome.
const minCallShare = 10

// callFloor is the least time left in a pass for a call to start.
func (r *Reconciler) callFloor() time.Duration { return r.cfg.CallTimeout / minCallShare }

// passLeft returns the time left to the pass of ctx before it has run for
// CallTimeout, and false outside one pass.
func (r *Reconciler) passLeft(ctx context.Context) (time.Duration, bool) {
	start, ok := ctx.Value(onePassKey{}).(time.Time)
	if !ok {
		return 0, false
	}
	return r.cfg.CallTimeout - r.clock.Since(start), true
}

// budgetLeft reports whether a call may still start in ctx: always outside
// one pass; inside, while at least the floor (CallTimeout/minCallShare)
// of the pass's CallTimeout is left. Every call of a pass ends by the time
// the pass has run for CallTimeout (bounded), so a pass returns within
// one CallTimeout.
func (r *Reconciler) budgetLeft(ctx context.Context) bool {
	left, ok := r.passLeft(ctx)
	return !ok || left >= r.callFloor()
}

// retryable reports whether err is a failure a later attempt may not meet:
// transient, rate limited, or a call that ran out of time.
func retryable(err error) bool {
	switch classify(err) {
	case OutcomeTransient, OutcomeRateLimited, OutcomeTimeout:
		return true
	}
	return false
}

// retryAfter returns the provider's retry-after hint in err's chain, or 0.
func retryAfter(err error) time.Duration {
	var hint interface{ RetryAfter() time.Duration }
	if errors.As(err, &hint) {
		return max(hint.RetryAfter(), 0)
	}
	return 0
}

// parallel applies fn to every object through call, at most Parallelism at
// a time, and returns results and errors by index. It returns once every
// call it started has returned.
func (r *Reconciler) parallel(ctx context.Context, objs []Object, verb Verb, fn func(context.Context, Object) (Object, error)) ([]Object, []error) {
	return r.fanOut(ctx, objs, func(ctx context.Context, o Object) (Object, error) {
		var got Object
		err := r.call(ctx, verb, func(ctx context.Context) error {
			var err error
			got, err = fn(ctx, o.clone())
			return err
		})
		return got, err
	})
}

// parallelOnce is parallel without retries (the caller's loop retries).
func (r *Reconciler) parallelOnce(ctx context.Context, objs []Object, verb Verb, fn func(context.Context, Object) (Object, error)) ([]Object, []error) {
	return r.fanOut(ctx, objs, func(ctx context.Context, o Object) (Object, error) {
		var got Object
		err := r.once(ctx, verb, func(ctx context.Context) error {
			var err error
			got, err = fn(ctx, o.clone())
			return err
		})
		return got, err
	})
}

// errNotSent is the result of a write not sent because a fence refused
// an earlier one of the same pass.
var errNotSent = fmt.Errorf("lbrecon: not sent after a refusal: %w", ErrFenced)

// fanOut runs fn over objs on an errgroup limited to Parallelism. Every
// object gets a result: objects not started when ctx ends get ctx.Err(),
// objects not started after a call was refused by a fence ([ErrFenced])
// get errNotSent, and objects not started once too little of one pass's
// CallTimeout is left get errNoTime.
func (r *Reconciler) fanOut(ctx context.Context, objs []Object, fn func(context.Context, Object) (Object, error)) ([]Object, []error) {
	out := make([]Object, len(objs))
	errs := make([]error, len(objs))
	var g errgroup.Group
	g.SetLimit(r.cfg.Parallelism)
	var fenced atomic.Bool
	for i, o := range objs {
		if err := ctx.Err(); err != nil {
			errs[i] = err
			continue
		}
		g.Go(func() error {
			if fenced.Load() {
				errs[i] = errNotSent
				return nil
			}
			if !r.budgetLeft(ctx) {
				errs[i] = errNoTime
				return nil
			}
			out[i], errs[i] = fn(ctx, o)
			if errors.Is(errs[i], ErrFenced) {
				fenced.Store(true)
			}
			return nil
		})
	}
	_ = g.Wait() // the functions report through errs
	return out, errs
}
