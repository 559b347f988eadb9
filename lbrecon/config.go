package lbrecon

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/utils/clock"

	"github.com/reconkit/reconkit/internal/jitter"
)

// Configuration: the errors New and the passes return, the defaults, Config and New.

// Errors returned by [Reconciler] methods; callers branch on them with
// errors.Is.
var (
	// ErrInvalidConfig is wrapped by New when the configuration is unusable.
	ErrInvalidConfig = errors.New("lbrecon: invalid config")
	// ErrResourceFailed is wrapped when an object failed again after it was
	// repaired or recreated [Config.FailureBudget] times. The count is kept
	// across calls; see [Reconciler.ResetFailures].
	ErrResourceFailed = errors.New("lbrecon: resource keeps failing")
	// ErrPendingTimeout is wrapped when an object stays pending longer than
	// [Config.PendingTimeout].
	ErrPendingTimeout = errors.New("lbrecon: resources still pending")
	// ErrNotDestroyable is wrapped when some objects could not be destroyed.
	ErrNotDestroyable = errors.New("lbrecon: resources could not be destroyed")
	// ErrNotConverged is wrapped when Reconcile made [Config.MaxPasses]
	// passes without reaching the desired state.
	ErrNotConverged = errors.New("lbrecon: plan did not converge")
	// ErrInconsistent is wrapped when the engine's answer contradicts
	// itself: two objects with one kind and ID, two owned objects with one
	// name and spec, an object whose parent is not listed. Nothing is
	// changed because of such an answer.
	ErrInconsistent = errors.New("lbrecon: inconsistent engine answer")
)

// Defaults used when the corresponding Config field is zero.
const (
	DefaultParallelism     = 16
	DefaultPollInterval    = 500 * time.Millisecond
	DefaultMaxPollInterval = 10 * time.Second
	DefaultPendingTimeout  = 10 * time.Minute
	DefaultConfirmTimeout  = 2 * time.Minute
	DefaultGetPollMax      = 1
	DefaultRetryBudget     = time.Minute
	DefaultCallTimeout     = 30 * time.Second
	DefaultRetryInterval   = 200 * time.Millisecond
	DefaultFailureBudget   = 3
	DefaultMaxPasses       = 32
)

// Config configures a [Reconciler]. Zero durations and counts take the
// defaults above.
type Config struct {
	// Engine is the provider's API. Required. It may also implement
	// [Repairer] and [Updater].
	Engine Engine
	// Steps run in this order. Required; kinds must be unique.
	Steps []Step
	// Tag is the ownership tag, "key=value", applied to every object the
	// reconciler creates. Only objects carrying it are changed. Required.
	Tag string
	// Scope is passed to Engine.List (see [Query]).
	Scope string

	// Parallelism bounds the engine calls in flight inside one phase.
	Parallelism int
	// PollInterval is the first wait before looking again at pending or
	// unconfirmed objects; waits grow by 30% up to MaxPollInterval.
	PollInterval    time.Duration
	MaxPollInterval time.Duration
	// PendingTimeout bounds how long one object may stay pending, measured
	// from when the reconciler first saw it pending, across calls.
	PendingTimeout time.Duration
	// ConfirmTimeout bounds how long a write waits for a listing to reflect
	// it: a created or updated object not listed by then is taken as lost
	// (and created again), a destroyed object still listed is destroyed
	// again, and a creation whose outcome is unknown (a transient error)
	// blocks its name until then. It must exceed the list lag (ListLag,
	// configured or declared by the engine): New refuses a smaller one
	// with ErrInvalidConfig, and raises the default to twice the lag
	// when the lag is longer.
	ConfirmTimeout time.Duration
	// ListLag bounds how long the provider's listings lag behind its
	// writes: every listing that starts ListLag after a call returned
	// reflects it. With it, a creation whose outcome is unknown (a
	// transient error, a lost answer) holds its name only until such a
	// listing, instead of ConfirmTimeout. Zero takes the lag the engine
	// declares ([ListLagger]); when it declares none, the lag is unknown.
	ListLag time.Duration
	// ListLagListings bounds the provider's lag in listings instead of
	// time: of the listings that start after a call returned, the
	// (ListLagListings+1)-th and later reflect it, whoever made the ones
	// before. With it, a creation of unknown outcome holds its name only
	// until this reconciler's (ListLagListings+1)-th listing started after
	// the call, instead of ConfirmTimeout. Zero takes the count the engine
	// declares ([ListingLagger]); when it declares none, that lag is
	// unknown. With both ListLag and ListLagListings, whichever listing
	// comes first ends the hold.
	ListLagListings int
	// Journal records every creation durably before it is sent (see
	// [Journal], [FileJournal]), so that a reconciler started after a
	// crash holds the names its predecessor may have created until a
	// listing shows them or ConfirmTimeout passes, instead of creating
	// them again while the listing lags; and every destruction, so that
	// it neither takes an object its predecessor destroyed, shown by a
	// lagging listing, for there, nor destroys it again. Required: a host that runs
	// without one says so with [NoJournal] (intents in memory only); New
	// refuses nil with ErrInvalidConfig.
	Journal Journal
	// Admit raises the fence to a new leadership term's fencing token:
	// the admit function the engine's [Guard] checks writes with
	// ([CheckToken]), such as a [Fence]'s Admit. When a call's context
	// carries a token ([WithToken]) other than the one of the term the
	// reconciler is in, the reconciler begins that term: it calls Admit
	// with the token before it reads anything (listing, journal), then
	// drops what it kept from the earlier term and reads the journal
	// again (see "Terms" in the package documentation). A refusal is the
	// call's error, and the reconciler stays in the term it was in. Nil:
	// a new term still drops the earlier term's memory and reads the
	// journal again, but the fence learns of the term only from its first
	// write, so a deposed leader may still write after this term read.
	// Reconcilers that share it call it concurrently.
	Admit func(token uint64) error
	// GetPollMax is the largest number of pending objects polled with one
	// Get each; more are polled with one List call instead.
	GetPollMax int
	// RetryBudget bounds the time Reconcile and Teardown spend retrying one
	// engine call that fails transiently or is rate limited. Permanent
	// errors are not retried, nor is a Create that failed transiently (it
	// may have created the object: the next listing tells). ReconcileOnce
	// and TeardownOnce never retry inside the call: the host's next call
	// is the retry.
	RetryBudget time.Duration
	// CallTimeout bounds each engine call attempt and each Journal call,
	// on Clock: the call's context ends then, and the attempt counts as a
	// timeout (a Create's outcome is then unknown). It also bounds each
	// pass of ReconcileOnce and TeardownOnce as a whole: every call of a
	// pass ends by the time the pass has run for CallTimeout, and none
	// starts with less than a tenth of it left, so a pass returns within
	// one CallTimeout.
	CallTimeout time.Duration
	// CallAttempts, when positive, also bounds the attempts of one call.
	CallAttempts int
	// RetryInterval is the first wait between attempts of one call (a
	// positive retry-after hint from the engine replaces it).
	RetryInterval time.Duration
	// FailureBudget is how many times the reconciler repairs or recreates
	// an object name that keeps failing before it leaves it failed and
	// reports ErrResourceFailed. The count survives Reconcile calls; it is
	// reset when an object of that name is seen ok, and by ResetFailures.
	FailureBudget int
	// MaxPasses bounds the passes of one blocking Reconcile call.
	MaxPasses int

	// Clock is used for every wait; nil means the real clock.
	Clock clock.Clock
	// Rand draws the jitter of the retries of failed engine calls,
	// uniformly in [0, 1); nil means math/rand/v2's Float64, whose global
	// source cannot be seeded. New calls it to split a source of the
	// Reconciler's own (safe for the fan-out's concurrent calls); it is
	// not called after New returns.
	Rand func() float64
	// Metrics receives call counts and durations; nil means none.
	Metrics Metrics
}

// New validates cfg, fills its defaults and returns a Reconciler.
func New(cfg Config) (*Reconciler, error) {
	bad := func(format string, a ...any) (*Reconciler, error) {
		return nil, fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, a...)...)
	}
	if cfg.Engine == nil {
		return bad("Engine is nil")
	}
	if cfg.Journal == nil {
		return bad("Journal is nil: set a Journal (such as a FileJournal) so that a process started after a crash " +
			"does not create again what its predecessor created, or NoJournal to choose to run without one")
	}
	if len(cfg.Steps) == 0 {
		return bad("no Steps")
	}
	key, value, ok := strings.Cut(cfg.Tag, "=")
	if !ok || key == "" || value == "" || strings.ContainsAny(cfg.Tag, " \t\r\n") {
		return bad("Tag %q must be key=value with a non-empty key and value and no spaces", cfg.Tag)
	}
	kinds := make(map[string]int, len(cfg.Steps))
	for i, st := range cfg.Steps {
		if st.Kind == "" || st.Plan == nil {
			return bad("step %d needs a Kind and a Plan", i)
		}
		if _, dup := kinds[st.Kind]; dup {
			return bad("two steps manage kind %q", st.Kind)
		}
		kinds[st.Kind] = i
	}
	deps := make([][]int, len(cfg.Steps))
	dependents := make([][]int, len(cfg.Steps))
	for i, st := range cfg.Steps {
		for _, k := range st.DependsOn {
			j, ok := kinds[k]
			if !ok || j >= i {
				return bad("step %q depends on %q, which is not an earlier step", st.Kind, k)
			}
			deps[i] = append(deps[i], j)
			dependents[j] = append(dependents[j], i)
		}
	}
	confirmSet := cfg.ConfirmTimeout != 0
	for _, f := range []struct {
		name string
		v    *time.Duration
		def  time.Duration
	}{
		{"PollInterval", &cfg.PollInterval, DefaultPollInterval},
		{"MaxPollInterval", &cfg.MaxPollInterval, DefaultMaxPollInterval},
		{"PendingTimeout", &cfg.PendingTimeout, DefaultPendingTimeout},
		{"ConfirmTimeout", &cfg.ConfirmTimeout, DefaultConfirmTimeout},
		{"RetryBudget", &cfg.RetryBudget, DefaultRetryBudget},
		{"RetryInterval", &cfg.RetryInterval, DefaultRetryInterval},
		{"CallTimeout", &cfg.CallTimeout, DefaultCallTimeout},
	} {
		if *f.v < 0 {
			return bad("%s is negative", f.name)
		}
		if *f.v == 0 {
			*f.v = f.def
		}
	}
	if cfg.ListLag < 0 {
		return bad("ListLag is negative")
	}
	if ll, ok := cfg.Engine.(ListLagger); ok && cfg.ListLag == 0 {
		cfg.ListLag = max(ll.ListLag(), 0) // declared by the provider
	}
	if cfg.ListLagListings < 0 {
		return bad("ListLagListings is negative")
	}
	if ll, ok := cfg.Engine.(ListingLagger); ok && cfg.ListLagListings == 0 {
		cfg.ListLagListings = max(ll.ListLagListings(), 0) // declared by the provider
	}
	if cfg.ListLag >= cfg.ConfirmTimeout {
		// An acknowledged creation not listed within ConfirmTimeout is
		// given up and made again: it must outlast the lag.
		if confirmSet {
			return bad("ConfirmTimeout %v must exceed the list lag %v (configured or declared by the engine): "+
				"a creation not listed by then is made again; raise it or leave it zero", cfg.ConfirmTimeout, cfg.ListLag)
		}
		cfg.ConfirmTimeout = 2 * cfg.ListLag
	}
	if cfg.MaxPollInterval < cfg.PollInterval {
		return bad("MaxPollInterval %v is below PollInterval %v", cfg.MaxPollInterval, cfg.PollInterval)
	}
	if cfg.CallAttempts < 0 {
		return bad("CallAttempts is negative")
	}
	for _, f := range []struct {
		name string
		v    *int
		def  int
	}{
		{"Parallelism", &cfg.Parallelism, DefaultParallelism},
		{"GetPollMax", &cfg.GetPollMax, DefaultGetPollMax},
		{"FailureBudget", &cfg.FailureBudget, DefaultFailureBudget},
		{"MaxPasses", &cfg.MaxPasses, DefaultMaxPasses},
	} {
		if *f.v < 0 {
			return bad("%s is negative", f.name)
		}
		if *f.v == 0 {
			*f.v = f.def
		}
	}
	cfg.Steps = slices.Clone(cfg.Steps)
	r := &Reconciler{cfg: cfg, tagKey: key, clock: cfg.Clock, rand: jitter.Split(cfg.Rand), metrics: cfg.Metrics, deps: deps, dependents: dependents,
		stepOf: kinds, mem: newMemory()}
	if r.clock == nil {
		r.clock = clock.RealClock{}
	}
	if r.metrics == nil {
		r.metrics = noMetrics{}
	}
	if cfg.Journal == NoJournal {
		r.cfg.Journal = nil // the host chose to run without one
	} else {
		r.cfg.Journal = boundedJournal{j: cfg.Journal, r: r}
	}
	return r, nil
}
