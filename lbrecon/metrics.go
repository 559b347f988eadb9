package lbrecon

import (
	"context"
	"errors"
	"time"

	"github.com/reconkit/reconkit/backoff"
)

// Verb names an engine call, or a whole reconciliation, in metrics.
type Verb string

// Verbs reported to a [Metrics] hook.
const (
	VerbList    Verb = "list"
	VerbGet     Verb = "get"
	VerbCreate  Verb = "create"
	VerbDestroy Verb = "destroy"
	VerbTag     Verb = "tag"
	VerbRepair  Verb = "repair"
	VerbUpdate  Verb = "update"
	// VerbReconcile is one whole call of Reconcile or ReconcileOnce.
	VerbReconcile Verb = "reconcile"
	// VerbTeardown is one whole call of Teardown or TeardownOnce.
	VerbTeardown Verb = "teardown"
)

// Outcome classifies the result of a call in metrics.
type Outcome string

// Outcomes reported to a [Metrics] hook.
const (
	OutcomeOK          Outcome = "ok"
	OutcomeNotFound    Outcome = "not_found"
	OutcomeRateLimited Outcome = "rate_limited"
	OutcomeTransient   Outcome = "transient"
	OutcomePermanent   Outcome = "permanent"
	OutcomeCanceled    Outcome = "canceled"
	// OutcomeTimeout is a call that ran out of time (context deadline).
	OutcomeTimeout Outcome = "timeout"
	// OutcomeConflict is an already-exists or conflict answer.
	OutcomeConflict Outcome = "conflict"
	// OutcomeNotSupported is an optional call the engine cannot make.
	OutcomeNotSupported Outcome = "not_supported"
)

// Metrics receives one observation per engine call attempt (retries count
// separately) and one per call of Reconcile, ReconcileOnce, Teardown and
// TeardownOnce. A host adapts it to Prometheus with
// a counter vector and a histogram vector labelled by verb and outcome.
//
// Threading contract: Observe is called concurrently from the reconciler's
// worker goroutines and must not block; it must not call back into the
// reconciler.
type Metrics interface {
	Observe(verb Verb, outcome Outcome, d time.Duration)
}

// MetricsFunc adapts a function to [Metrics].
type MetricsFunc func(verb Verb, outcome Outcome, d time.Duration)

// Observe calls f.
func (f MetricsFunc) Observe(verb Verb, outcome Outcome, d time.Duration) { f(verb, outcome, d) }

var _ Metrics = MetricsFunc(nil)

type noMetrics struct{}

func (noMetrics) Observe(Verb, Outcome, time.Duration) {}

// classify maps an engine error to an outcome.
func classify(err error) Outcome {
	var hint interface{ RetryAfter() time.Duration }
	switch {
	case err == nil:
		return OutcomeOK
	case errors.Is(err, context.DeadlineExceeded):
		return OutcomeTimeout
	case errors.Is(err, context.Canceled):
		return OutcomeCanceled
	case errors.Is(err, ErrNotFound):
		return OutcomeNotFound
	case errors.Is(err, ErrAlreadyExists), errors.Is(err, ErrConflict):
		return OutcomeConflict
	case errors.Is(err, ErrNotSupported):
		return OutcomeNotSupported
	case errors.As(err, &hint):
		return OutcomeRateLimited
	case backoff.IsPermanent(err):
		return OutcomePermanent
	}
	return OutcomeTransient
}
