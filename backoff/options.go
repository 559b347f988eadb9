package backoff

import (
	"errors"
	"fmt"
	"math"
	"time"

	"k8s.io/utils/clock"
)

// Defaults used when the corresponding option is not given.
const (
	// DefaultInitialInterval is Retry's wait after the first failed attempt.
	DefaultInitialInterval = 100 * time.Millisecond
	// DefaultMaxInterval caps the exponentially growing base wait. Thirty
	// seconds keeps a recovered dependency from going unnoticed for long.
	DefaultMaxInterval = 30 * time.Second
	// DefaultMultiplier is the factor by which Retry's base wait grows after
	// each failure. 1.5 is the cenkalti/backoff default: from 100ms it reaches
	// the 30s cap after about fifteen failures, roughly 90 seconds in. Poll's
	// default multiplier is 1: it polls at its interval.
	DefaultMultiplier = 1.5
	// DefaultJitter is Retry's default randomization factor: each wait is
	// drawn uniformly from [base*(1-j), base*(1+j)]. Poll's default is 0.
	DefaultJitter = 0.2
	// DefaultMaxRetryAfter caps a retry-after hint from the operation.
	DefaultMaxRetryAfter = time.Minute
	// DefaultQuietPeriod is how long Retry and Poll keep failures out of the
	// logs after the first attempt. Every uses no quiet period unless one is
	// given.
	DefaultQuietPeriod = 2 * time.Second
	// DefaultLogInterval is the minimum time between two logged failures.
	DefaultLogInterval = 10 * time.Second
)

// ErrInvalidOption is wrapped by the error Retry, Every and Poll return,
// without calling the operation, when an option or argument is out of range.
var ErrInvalidOption = errors.New("backoff: invalid option")

// RetryOption configures [Retry].
type RetryOption interface{ applyRetry(*options) }

// EveryOption configures [Every].
type EveryOption interface{ applyEvery(*options) }

// PollOption configures [Poll].
type PollOption interface{ applyPoll(*options) }

// Option configures any of [Retry], [Every] and [Poll]: the clock, the
// logging policy and the operation's name.
type Option interface {
	RetryOption
	EveryOption
	PollOption
}

// WaitOption shapes the waits of [Retry] and [Poll]: growth, cap, jitter and
// retry-after hints. [Every] waits a fixed interval and takes none.
type WaitOption interface {
	RetryOption
	PollOption
}

// StartOption configures how [Every] and [Poll] start.
type StartOption interface {
	EveryOption
	PollOption
}

// The option types. Each implements exactly the interfaces of the loops it
// applies to, so an option that one loop would ignore does not compile there.
type (
	commonOption func(*options)
	waitOption   func(*options)
	retryOption  func(*options)
	startOption  func(*options)
	everyOption  func(*options)
)

func (f commonOption) applyRetry(o *options) { f(o) }
func (f commonOption) applyEvery(o *options) { f(o) }
func (f commonOption) applyPoll(o *options)  { f(o) }
func (f waitOption) applyRetry(o *options)   { f(o) }
func (f waitOption) applyPoll(o *options)    { f(o) }
func (f retryOption) applyRetry(o *options)  { f(o) }
func (f startOption) applyEvery(o *options)  { f(o) }
func (f startOption) applyPoll(o *options)   { f(o) }
func (f everyOption) applyEvery(o *options)  { f(o) }

var (
	_ Option      = commonOption(nil)
	_ WaitOption  = waitOption(nil)
	_ RetryOption = retryOption(nil)
	_ StartOption = startOption(nil)
	_ EveryOption = everyOption(nil)
)

type options struct {
	initialInterval time.Duration
	maxInterval     time.Duration
	maxIntervalSet  bool
	multiplier      float64
	jitter          float64
	maxElapsedTime  time.Duration
	maxAttempts     int
	maxRetryAfter   time.Duration
	clock           clock.Clock
	quietPeriod     time.Duration
	logInterval     time.Duration
	name            string
	delayedStart    bool
	failureMax      time.Duration // Every's backoff cap on failures; 0: none
	failureSet      bool
	rand            func() float64 // every jitter draw; nil: math/rand/v2's
}

// WithInitialInterval sets Retry's base wait after the first failure
// (default 100ms). It must be positive; if it exceeds the maximum interval,
// the maximum interval is used. Poll takes its first interval as an argument.
func WithInitialInterval(d time.Duration) RetryOption {
	return retryOption(func(o *options) { o.initialInterval = d })
}

// WithMaxInterval caps the base wait (default 30s; for Poll, the larger of
// 30s and its interval). It must be positive. With jitter j a single wait
// can be up to j above the cap.
func WithMaxInterval(d time.Duration) WaitOption {
	return waitOption(func(o *options) { o.maxInterval, o.maxIntervalSet = d, true })
}

// WithMultiplier sets the factor by which the base wait grows after each
// wait (default 1.5 for Retry, 1 for Poll). It must be at least 1; 1 gives
// a constant wait.
func WithMultiplier(f float64) WaitOption {
	return waitOption(func(o *options) { o.multiplier = f })
}

// WithJitter sets the randomization factor j in [0, 1] (default 0.2 for
// Retry, 0 for Poll): each computed wait is drawn uniformly from
// [base*(1-j), base*(1+j)], and each wait a retry-after hint asks for from
// [hint, hint*(1+j)]. Zero makes waits deterministic, which tests rely on.
// Every takes its jitter as an argument.
func WithJitter(f float64) WaitOption {
	return waitOption(func(o *options) { o.jitter = f })
}

// WithMaxRetryAfter caps the wait that a retry-after hint returned by the
// operation asks for, jitter included (default one minute): no hinted wait
// is longer. A hint above the cap is logged once per call of
// Retry or Poll. Zero makes the loop ignore hints and use the computed wait;
// negative values are invalid.
func WithMaxRetryAfter(d time.Duration) WaitOption {
	return waitOption(func(o *options) { o.maxRetryAfter = d })
}

// WithMaxElapsedTime makes Retry give up, with an error wrapping [ErrGaveUp],
// instead of starting a wait that would end more than d after the first
// attempt. Zero, the default, means no limit; negative values are invalid.
// Poll takes its timeout as an argument.
func WithMaxElapsedTime(d time.Duration) RetryOption {
	return retryOption(func(o *options) { o.maxElapsedTime = d })
}

// WithMaxAttempts makes Retry give up, with an error wrapping [ErrGaveUp],
// after n failed calls of the operation (the first call included). Zero, the
// default, means no limit; negative values are invalid.
func WithMaxAttempts(n int) RetryOption {
	return retryOption(func(o *options) { o.maxAttempts = n })
}

// WithClock sets the clock used for every wait and every time measurement.
// A nil clock, the default, is the real clock.
func WithClock(c clock.Clock) Option {
	return commonOption(func(o *options) { o.clock = c })
}

// WithQuietPeriod sets how long after the first attempt failures are kept out
// of the V(0) log (default 2s for Retry and Poll, 0 for Every). Zero logs the
// first failure at once; negative values are invalid.
func WithQuietPeriod(d time.Duration) Option {
	return commonOption(func(o *options) { o.quietPeriod = d })
}

// WithLogInterval sets the minimum time between two failures logged at V(0)
// (default 10s). Zero logs every failure after the quiet period; negative
// values are invalid.
func WithLogInterval(d time.Duration) Option {
	return commonOption(func(o *options) { o.logInterval = d })
}

// WithName names the operation in log lines (key "operation") and in the
// errors the loops build. By default log lines carry no name.
func WithName(name string) Option {
	return commonOption(func(o *options) { o.name = name })
}

// WithRand sets the source of every jitter draw of the loop: a function
// returning values uniformly in [0, 1) (values outside are clamped into
// it). nil, the default, means math/rand/v2's Float64, whose global
// source cannot be seeded; a caller that wants reproducible waits (a test,
// a simulator replaying a seed) passes, for example, the Float64 method of
// a seeded *rand.Rand. The loop calls it on the caller's goroutine, one
// draw per wait, so a function that no other goroutine calls needs no
// lock.
func WithRand(r func() float64) Option {
	return commonOption(func(o *options) { o.rand = r })
}

// WithDelayedStart makes Every and Poll wait one interval (with jitter)
// before the first call instead of calling at once.
func WithDelayedStart() StartOption {
	return startOption(func(o *options) { o.delayedStart = true })
}

// WithFailureBackoff makes [Every] back off when fn fails, instead of
// waiting its interval after a failure as after a success. After the n-th
// failure in a row the wait's base is interval × 1.5^n, capped at maxWait
// (or at the interval if that is longer), and each wait is drawn from
// [base*0.8, base*1.2] (the package's default jitter, so loops that failed
// together spread out even when Every's own jitter is 0), never shorter
// than the interval. A positive retry-after hint in fn's error is honoured
// as a minimum, as Retry honours it (up to [DefaultMaxRetryAfter]). The
// first run that returns nil resets the wait to the interval. maxWait must
// be positive.
//
// A loop that talks to a server needs it (or an interval of a second or
// more): with a maxWait of 30 s, an answer that fails for good costs at
// most one call per 24 s once the cap is reached, however short the
// interval.
func WithFailureBackoff(maxWait time.Duration) EveryOption {
	return everyOption(func(o *options) { o.failureMax, o.failureSet = maxWait, true })
}

// loop names the function options are built for; the defaults differ.
type loop int

const (
	loopRetry loop = iota
	loopEvery
	loopPoll
)

// newOptions returns the defaults of l, to which the caller applies its
// options before calling validate.
func newOptions(l loop) *options {
	o := &options{
		initialInterval: DefaultInitialInterval,
		maxInterval:     DefaultMaxInterval,
		multiplier:      DefaultMultiplier,
		jitter:          DefaultJitter,
		maxRetryAfter:   DefaultMaxRetryAfter,
		quietPeriod:     DefaultQuietPeriod,
		logInterval:     DefaultLogInterval,
	}
	switch l {
	case loopEvery:
		o.quietPeriod = 0
	case loopPoll:
		o.multiplier, o.jitter = 1, 0
	}
	return o
}

func retryOptions(opts []RetryOption) (*options, error) {
	o := newOptions(loopRetry)
	for _, opt := range opts {
		if opt != nil {
			opt.applyRetry(o)
		}
	}
	return o, o.validate()
}

func everyOptions(opts []EveryOption) (*options, error) {
	o := newOptions(loopEvery)
	for _, opt := range opts {
		if opt != nil {
			opt.applyEvery(o)
		}
	}
	return o, o.validate()
}

// pollOptions builds Poll's options; interval is its first wait.
func pollOptions(interval time.Duration, opts []PollOption) (*options, error) {
	o := newOptions(loopPoll)
	for _, opt := range opts {
		if opt != nil {
			opt.applyPoll(o)
		}
	}
	o.initialInterval = interval
	if !o.maxIntervalSet {
		o.maxInterval = max(o.maxInterval, interval)
	}
	return o, o.validate()
}

// validate checks o and fills the clock; the error wraps ErrInvalidOption.
func (o *options) validate() error {
	if o.clock == nil {
		o.clock = clock.RealClock{}
	}
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalidOption}, args...)...))
	}
	if o.initialInterval <= 0 {
		bad("initial interval %v must be positive", o.initialInterval)
	}
	if o.maxInterval <= 0 {
		bad("max interval %v must be positive", o.maxInterval)
	}
	if !(o.multiplier >= 1) || math.IsInf(o.multiplier, 0) {
		bad("multiplier %v must be a finite number of at least 1", o.multiplier)
	}
	if !(o.jitter >= 0 && o.jitter <= 1) {
		bad("jitter %v must be within [0, 1]", o.jitter)
	}
	if o.maxElapsedTime < 0 {
		bad("max elapsed time %v must not be negative", o.maxElapsedTime)
	}
	if o.maxAttempts < 0 {
		bad("max attempts %d must not be negative", o.maxAttempts)
	}
	if o.maxRetryAfter < 0 {
		bad("max retry-after %v must not be negative", o.maxRetryAfter)
	}
	if o.quietPeriod < 0 {
		bad("quiet period %v must not be negative", o.quietPeriod)
	}
	if o.logInterval < 0 {
		bad("log interval %v must not be negative", o.logInterval)
	}
	if o.failureSet && o.failureMax <= 0 {
		bad("failure backoff cap %v must be positive", o.failureMax)
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	if o.initialInterval > o.maxInterval {
		o.initialInterval = o.maxInterval
	}
	return nil
}
