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
	// DefaultInitialInterval is the wait after the first failed attempt.
	DefaultInitialInterval = 100 * time.Millisecond
	// DefaultMaxInterval caps the exponentially growing base wait. Thirty
	// seconds keeps a recovered dependency from going unnoticed for long.
	DefaultMaxInterval = 30 * time.Second
	// DefaultMultiplier is the factor by which the base wait grows after each
	// failure. 1.5 is the cenkalti/backoff default: from 100ms it reaches the
	// 30s cap after about fifteen failures, roughly 90 seconds in.
	DefaultMultiplier = 1.5
	// DefaultJitter is the default randomization factor: each wait is drawn
	// uniformly from [base*(1-j), base*(1+j)].
	DefaultJitter = 0.2
	// DefaultMaxRetryAfter caps a retry-after hint from the operation.
	DefaultMaxRetryAfter = time.Minute
	// DefaultQuietPeriod is how long Retry keeps failures out of the logs
	// after the first attempt. Every uses no quiet period unless one is given.
	DefaultQuietPeriod = 2 * time.Second
	// DefaultLogInterval is the minimum time between two logged failures.
	DefaultLogInterval = 10 * time.Second
)

// ErrInvalidOption is wrapped by the error Retry and Every return, without
// calling the operation, when an option or argument is out of range.
var ErrInvalidOption = errors.New("backoff: invalid option")

// Option configures Retry and Every. Options that only make sense for one of
// them are ignored by the other, as noted on each.
type Option func(*options)

type options struct {
	initialInterval time.Duration
	maxInterval     time.Duration
	multiplier      float64
	jitter          float64
	maxElapsedTime  time.Duration
	maxAttempts     int
	maxRetryAfter   time.Duration
	clock           clock.Clock
	quietPeriod     time.Duration
	quietPeriodSet  bool
	logInterval     time.Duration
	name            string
	delayedStart    bool
}

// WithInitialInterval sets the base wait after the first failure (default
// 100ms). It must be positive; if it exceeds the maximum interval, the
// maximum interval is used. Retry only.
func WithInitialInterval(d time.Duration) Option {
	return func(o *options) { o.initialInterval = d }
}

// WithMaxInterval caps the base wait (default 30s). It must be positive.
// With jitter j a single wait can be up to j above the cap. Retry only.
func WithMaxInterval(d time.Duration) Option {
	return func(o *options) { o.maxInterval = d }
}

// WithMultiplier sets the factor by which the base wait grows after each
// failure (default 1.5). It must be at least 1; 1 gives a constant wait.
// Retry only.
func WithMultiplier(f float64) Option {
	return func(o *options) { o.multiplier = f }
}

// WithJitter sets the randomization factor j in [0, 1] (default 0.2): each
// wait is drawn uniformly from [base*(1-j), base*(1+j)]. Zero makes waits
// deterministic, which tests rely on. Retry only; Every takes its jitter as an
// argument.
func WithJitter(f float64) Option {
	return func(o *options) { o.jitter = f }
}

// WithMaxElapsedTime makes Retry give up, with an error wrapping [ErrGaveUp],
// instead of starting a wait that would end more than d after the first
// attempt. Zero, the default, means no limit; negative values are invalid.
// Retry only.
func WithMaxElapsedTime(d time.Duration) Option {
	return func(o *options) { o.maxElapsedTime = d }
}

// WithMaxAttempts makes Retry give up, with an error wrapping [ErrGaveUp],
// after n failed calls of the operation (the first call included). Zero, the
// default, means no limit; negative values are invalid. Retry only.
func WithMaxAttempts(n int) Option {
	return func(o *options) { o.maxAttempts = n }
}

// WithMaxRetryAfter caps retry-after hints returned by the operation
// (default one minute). Zero makes Retry ignore hints and use the computed
// wait; negative values are invalid. Retry only.
func WithMaxRetryAfter(d time.Duration) Option {
	return func(o *options) { o.maxRetryAfter = d }
}

// WithClock sets the clock used for every wait and every time measurement.
// A nil clock, the default, is the real clock.
func WithClock(c clock.Clock) Option {
	return func(o *options) { o.clock = c }
}

// WithQuietPeriod sets how long after the first attempt failures are kept out
// of the V(0) log (default 2s for Retry, 0 for Every). Zero logs the first
// failure at once; negative values are invalid.
func WithQuietPeriod(d time.Duration) Option {
	return func(o *options) {
		o.quietPeriod = d
		o.quietPeriodSet = true
	}
}

// WithLogInterval sets the minimum time between two failures logged at V(0)
// (default 10s). Zero logs every failure after the quiet period; negative
// values are invalid.
func WithLogInterval(d time.Duration) Option {
	return func(o *options) { o.logInterval = d }
}

// WithName names the operation in log lines (key "operation") and in the
// errors Retry builds. By default log lines carry no name.
func WithName(name string) Option {
	return func(o *options) { o.name = name }
}

// WithDelayedStart makes Every wait one interval (with jitter) before the
// first run instead of running at once. Every only.
func WithDelayedStart() Option {
	return func(o *options) { o.delayedStart = true }
}

// newOptions applies opts over the defaults and validates the result.
// defaultQuiet is the quiet period used when WithQuietPeriod is not given.
func newOptions(opts []Option, defaultQuiet time.Duration) (*options, error) {
	o := &options{
		initialInterval: DefaultInitialInterval,
		maxInterval:     DefaultMaxInterval,
		multiplier:      DefaultMultiplier,
		jitter:          DefaultJitter,
		maxRetryAfter:   DefaultMaxRetryAfter,
		logInterval:     DefaultLogInterval,
	}
	for _, opt := range opts {
		if opt != nil {
			opt(o)
		}
	}
	if !o.quietPeriodSet {
		o.quietPeriod = defaultQuiet
	}
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
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if o.initialInterval > o.maxInterval {
		o.initialInterval = o.maxInterval
	}
	return o, nil
}
