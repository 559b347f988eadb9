package election

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/utils/clock"

	"github.com/reconkit/reconkit/backoff"
	"github.com/reconkit/reconkit/internal/jitter"
)

// Defaults of Run's options.
const (
	// DefaultLeadReturnTimeout is how long Run waits, after a term ended,
	// for lead to return before it logs that lead is late (and keeps
	// waiting).
	DefaultLeadReturnTimeout = 10 * time.Second
	// DefaultReleaseTimeout bounds the release Run sends after lead
	// returned.
	DefaultReleaseTimeout = 5 * time.Second
	// DefaultRetryInitialInterval is the first wait after a failed
	// Campaign or a failed lead.
	DefaultRetryInitialInterval = 100 * time.Millisecond
	// DefaultRetryMaxInterval caps the wait between failed Campaigns or
	// failed leads.
	DefaultRetryMaxInterval = 10 * time.Second
)

// RunOption configures Run.
type RunOption func(*runOptions)

type runOptions struct {
	leadReturnTimeout time.Duration
	releaseTimeout    time.Duration
	initialInterval   time.Duration
	maxInterval       time.Duration
	jitter            float64
	stopOnError       bool
	clock             clock.Clock
	rand              func() float64
}

// WithLeadReturnTimeout sets how long Run waits for lead to return after
// its context ended before logging an error (default 10s). Run logs again
// every d and keeps waiting: it never releases leadership while lead runs.
// d must be positive.
func WithLeadReturnTimeout(d time.Duration) RunOption {
	return func(o *runOptions) { o.leadReturnTimeout = d }
}

// WithReleaseTimeout bounds the Resign that Run sends after lead returned
// (default 5s). d must be positive.
func WithReleaseTimeout(d time.Duration) RunOption {
	return func(o *runOptions) { o.releaseTimeout = d }
}

// WithRetryInterval sets the first and the largest wait between failed
// Campaigns or failed leads (defaults 100ms and 10s); waits grow by half
// after each failure, with ±20% jitter. Both must be positive.
func WithRetryInterval(initial, max time.Duration) RunOption {
	return func(o *runOptions) { o.initialInterval, o.maxInterval = initial, max }
}

// WithRetryJitter sets the randomization factor of retry waits and of
// the pauses between terms, in [0, 1] (default 0.2). Zero makes them
// deterministic, which tests rely on.
func WithRetryJitter(f float64) RunOption {
	return func(o *runOptions) { o.jitter = f }
}

// WithStopOnError makes Run return, after releasing leadership, the first
// error lead returns, instead of logging it and campaigning again.
func WithStopOnError() RunOption {
	return func(o *runOptions) { o.stopOnError = true }
}

// WithRunClock sets the clock for Run's waits (default the real clock).
func WithRunClock(c clock.Clock) RunOption {
	return func(o *runOptions) { o.clock = c }
}

// WithRand sets the source of Run's jitter draws (its retry waits and
// the pauses between terms): a function returning values uniformly in
// [0, 1). nil, the default, means math/rand/v2's Float64. Run calls it
// from its own goroutine only, so a source that nothing else calls needs
// no lock; a simulator that replays a seed gives each Run one of its own.
func WithRand(r func() float64) RunOption {
	return func(o *runOptions) { o.rand = r }
}

// ErrInvalidRunOption is wrapped by the error Run returns at once when an
// option is out of range.
var ErrInvalidRunOption = errors.New("election: invalid Run option")

func newRunOptions(opts []RunOption) (*runOptions, error) {
	o := &runOptions{
		leadReturnTimeout: DefaultLeadReturnTimeout,
		releaseTimeout:    DefaultReleaseTimeout,
		initialInterval:   DefaultRetryInitialInterval,
		maxInterval:       DefaultRetryMaxInterval,
		jitter:            0.2,
	}
	for _, f := range opts {
		f(o)
	}
	if o.clock == nil {
		o.clock = clock.RealClock{}
	}
	switch {
	case o.leadReturnTimeout <= 0:
		return nil, fmt.Errorf("%w: lead return timeout %v is not positive", ErrInvalidRunOption, o.leadReturnTimeout)
	case o.releaseTimeout <= 0:
		return nil, fmt.Errorf("%w: release timeout %v is not positive", ErrInvalidRunOption, o.releaseTimeout)
	case o.initialInterval <= 0 || o.maxInterval <= 0:
		return nil, fmt.Errorf("%w: retry intervals %v, %v must be positive", ErrInvalidRunOption, o.initialInterval, o.maxInterval)
	case !(o.jitter >= 0 && o.jitter <= 1):
		return nil, fmt.Errorf("%w: retry jitter %v is not in [0, 1]", ErrInvalidRunOption, o.jitter)
	}
	return o, nil
}

// Run campaigns on e and calls lead for every term it wins, until ctx ends.
// After a term ends (lost, resigned by lead, or lead returned) it campaigns
// again: losing leadership never ends Run, as it never ends the process.
// Before it does, it pauses for the retry interval, growing by half after
// each consecutive term shorter than the maximum interval and spread by
// the retry jitter, so neither a lead that returns or resigns at once nor
// a backend that ends every term at once makes Run spin through terms,
// and candidates whose terms ended together do not campaign in step.
//
// Every term ends in this strict order:
//  1. lead's context is cancelled (the term was lost, or ctx ended);
//  2. Run waits for lead to return, however long that takes: leadership is
//     never released while lead still runs. After WithLeadReturnTimeout it
//     logs an error, and again after each further timeout;
//  3. the term context, which is the in-memory leader flag that guards and
//     write gates check, ends;
//  4. leadership is released (Resign), so that a successor starts at once.
//
// Steps 3 and 4 are both done by Leadership.Resign, in that order.
//
// Threading contract for lead: Run calls it on a goroutine of its own, never
// twice at once, with the term's Leadership and a context that ends when the
// term ends or ctx ends; context.Cause tells which. lead must return
// promptly after its context ends; it may return earlier: a nil error
// releases the term and campaigns again, a non-nil error is logged (or
// returned, with WithStopOnError) and the next Campaign waits a backoff
// first. lead may call l.Resign itself. A panic in lead is not recovered.
//
// Failed Campaigns are retried with backoff (WithRetryInterval);
// ErrClosed from the elector ends Run with that error. Run returns nil
// when ctx ends, as a controller-runtime Runnable does, and only after
// lead has returned and the release was sent: stepping down on request is
// not a failure. It returns an error only for a real failure: ErrClosed,
// lead's error with WithStopOnError, or invalid options. Invalid options make Run return an error wrapping
// ErrInvalidRunOption at once. Run logs through the logr.Logger in ctx.
func Run(ctx context.Context, e Elector, lead func(ctx context.Context, l Leadership) error, opts ...RunOption) error {
	o, err := newRunOptions(opts)
	if err != nil {
		return err
	}
	if e == nil || lead == nil {
		return fmt.Errorf("%w: nil elector or lead function", ErrInvalidRunOption)
	}
	log := logr.FromContextOrDiscard(ctx).WithValues("identity", e.Identity())
	bo := []backoff.RetryOption{
		backoff.WithClock(o.clock),
		backoff.WithInitialInterval(o.initialInterval),
		backoff.WithMaxInterval(o.maxInterval),
		backoff.WithJitter(o.jitter),
		backoff.WithName("election term"),
		backoff.WithRand(o.rand),
	}
	// steppedDown counts consecutive short terms that ended without a
	// failure, however they ended: lead returned nil, lead resigned, or
	// the term was lost. Each is followed by a pause that grows like the
	// retry backoff, so a lead that returns or resigns at once, or a
	// backend that ends every term at once, cannot spin through terms
	// (each one a Lease transition or an etcd revision). A term that
	// lasted at least the maximum retry interval starts the count anew.
	steppedDown := 0
	for {
		var stepped bool
		var lasted time.Duration
		// Retry returns nil after a term that ended without error; its
		// backoff starts anew for the next one.
		err := backoff.Retry(ctx, func(ctx context.Context) error {
			return runTerm(ctx, log, o, e, lead, &stepped, &lasted)
		}, bo...)
		if ctx.Err() != nil {
			return nil // stepping down on request is not a failure
		}
		if err != nil {
			return err
		}
		if !stepped {
			steppedDown = 0
			continue
		}
		if lasted >= o.maxInterval {
			steppedDown = 0
		}
		steppedDown++
		pause := o.stepDownPause(steppedDown)
		log.V(1).Info("term ended; pausing before campaigning again", "pause", pause)
		t := o.clock.NewTimer(pause)
		select {
		case <-t.C():
		case <-ctx.Done():
			t.Stop()
			return nil
		}
	}
}

// stepDownPause is the pause after the n-th consecutive short term that
// ended without a failure: the retry interval, growing by half each time
// up to the maximum, then spread by the retry jitter, so that candidates
// whose terms a server restart ended at once do not campaign again in
// step.
func (o *runOptions) stepDownPause(n int) time.Duration {
	d := o.initialInterval
	for i := 1; i < n && d < o.maxInterval; i++ {
		d += d / 2
	}
	d = min(d, o.maxInterval)
	if o.jitter > 0 {
		d += time.Duration((2*jitter.Float64(o.rand) - 1) * o.jitter * float64(d))
	}
	return d
}

// errLeadFailed marks lead's errors apart from Campaign's in Retry's logs.
var errLeadFailed = errors.New("lead failed")

// runTerm campaigns once and, if it wins, runs one term in the strict
// release order. It returns nil when the term ended without error, an
// error for Retry to back off on, or a permanent one that ends Run.
//
// stepped reports a term that ran and ended without a failure (lead
// returned nil, resigned, or the term was lost), and lasted how long it
// ran, on Run's clock.
func runTerm(ctx context.Context, log logr.Logger, o *runOptions, e Elector, lead func(context.Context, Leadership) error, stepped *bool, lasted *time.Duration) error {
	// ctx bounds the wait only (see Elector.Campaign): the term outlives
	// it, and is released below after lead returned.
	l, err := e.Campaign(ctx)
	if err == nil && ctx.Err() != nil {
		// ctx ended while Campaign returned: the term never started for
		// lead; give it back at once.
		release(ctx, log, o, l)
		return ctx.Err()
	}
	if err != nil {
		if errors.Is(err, ErrClosed) {
			return backoff.Permanent(err)
		}
		return fmt.Errorf("campaign: %w", err)
	}
	log = log.WithValues("token", uint64(l.Token()))
	log.Info("Leading")

	// 1. lead's context ends with the term or with ctx.
	leadCtx, cancelLead := context.WithCancelCause(l.Context())
	defer cancelLead(context.Canceled)
	stopLead := context.AfterFunc(ctx, func() { cancelLead(context.Cause(ctx)) })
	defer stopLead()

	start := o.clock.Now()
	done := make(chan error, 1)
	go func() { done <- lead(leadCtx, l) }()

	var leadErr error
	select {
	case leadErr = <-done:
	case <-leadCtx.Done():
		// 2. Wait for lead, however long it takes.
		leadErr = waitLead(log, o, done, context.Cause(leadCtx))
	}
	endCause := context.Cause(leadCtx) // nil if lead returned on its own
	cancelLead(context.Canceled)

	// 3 and 4: Resign ends the term context, then releases.
	release(ctx, log, o, l)
	log.Info("Stopped leading", "cause", context.Cause(l.Context()))

	*lasted = o.clock.Since(start)
	if leadErr == nil || ctx.Err() != nil {
		// Whatever ended the term (lead's nil, its Resign, a loss), the
		// next campaign waits a pause: see Run.
		*stepped = ctx.Err() == nil
		return nil
	}
	if endCause != nil && (errors.Is(leadErr, context.Canceled) || errors.Is(leadErr, endCause)) {
		// lead merely reported that its term ended.
		*stepped = true
		return nil
	}
	if o.stopOnError {
		return backoff.Permanent(fmt.Errorf("election: lead: %w", leadErr))
	}
	log.Error(leadErr, "Lead failed; campaigning again after a backoff")
	return fmt.Errorf("%w: %w", errLeadFailed, leadErr)
}

// waitLead waits for lead to return after its context ended, logging an
// error every timeout it is late.
func waitLead(log logr.Logger, o *runOptions, done <-chan error, cause error) error {
	start := o.clock.Now()
	for {
		t := o.clock.NewTimer(o.leadReturnTimeout)
		select {
		case err := <-done:
			t.Stop()
			return err
		case <-t.C():
			log.Error(cause, "lead has not returned since its term ended; leadership is held until it does",
				"waiting", o.clock.Since(start))
		}
	}
}

// release resigns l with a bounded context detached from ctx.
func release(ctx context.Context, log logr.Logger, o *runOptions, l Leadership) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), o.releaseTimeout)
	defer cancel()
	if err := l.Resign(rctx); err != nil {
		log.Error(err, "Releasing leadership failed; a successor waits until the term expires")
	}
}
