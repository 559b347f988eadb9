package nodestatus

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// Call names one kind of API request in metrics.
type Call string

// Calls reported to a [Metrics] hook.
const (
	CallGetNode     Call = "get_node"
	CallCreateNode  Call = "create_node"
	CallPatchStatus Call = "patch_node_status"
	// CallPatchNode is a patch of the Node itself: the shutdown cordon and
	// its undoing.
	CallPatchNode   Call = "patch_node"
	CallDeleteNode  Call = "delete_node"
	CallGetLease    Call = "get_lease"
	CallCreateLease Call = "create_lease"
	CallUpdateLease Call = "update_lease"
	CallDeleteLease Call = "delete_lease"
	// CallPing is a call of the provider's Ping, not an API request.
	CallPing Call = "ping"
)

// Outcome classifies the result of one API request.
type Outcome string

// Outcomes reported to a [Metrics] hook and used to decide about retries.
const (
	OutcomeOK Outcome = "ok"
	// OutcomeConflict is a 409: the copy the request was computed against
	// is stale (or the object already exists). The controller reads it
	// again and retries at once.
	OutcomeConflict Outcome = "conflict"
	// OutcomeNotFound is a 404.
	OutcomeNotFound Outcome = "not_found"
	// OutcomeThrottled is a 429; the retry waits as long as the server
	// asks, up to the retry cap.
	OutcomeThrottled Outcome = "throttled"
	// OutcomeRejected is any other 4xx (422 invalid, 403 forbidden, 413
	// too large, ...): sending the same request again cannot succeed, so
	// it is never retried as it is (see [ErrRejected]).
	OutcomeRejected Outcome = "rejected"
	// OutcomeTransient is a 5xx, a timeout or a connection error: retried
	// with backoff.
	OutcomeTransient Outcome = "transient"
	// OutcomeCanceled is a request cut short because Run's context ended.
	OutcomeCanceled Outcome = "canceled"
	// OutcomeFailed is a ping that returned an error or outlived
	// PingTimeout.
	OutcomeFailed Outcome = "failed"
)

// ErrRejected is wrapped, together with the API server's error, by the
// error handed to the ErrorHandler for a request the API server refused for
// good (a 4xx other than 404, 409 and 429: an invalid label, a field the
// NodeRestriction admission plugin forbids, annotations over their size
// limit). The controller never sends such a request again as it is: a
// status write falls back to leaving labels and annotations as they were,
// then to writing only conditions, and the next write starts again from the
// provider's newest status.
var ErrRejected = errors.New("nodestatus: rejected by the API server")

// Observation is one finished API request, or one ping of the provider.
type Observation struct {
	Call    Call
	Outcome Outcome
	// Code is the HTTP status code of the answer: 200 for success, the
	// API server's code for an error it returned (409, 422, 429, 500,
	// ...), 0 when no answer came (a timeout, a refused connection, a
	// canceled request) and for pings.
	Code int
	// Latency is the request's (or the ping's) duration. For
	// CallUpdateLease it is the heartbeat latency. A ping that outlived
	// PingTimeout is observed when it returns, with its whole duration.
	Latency time.Duration
}

// EventRecorder receives the Kubernetes Events the controller emits about
// its Node: EventRegistered, EventReRegistered (Normal) and
// EventStatusRejected (Warning). client-go's record.EventRecorder fits
// through a small adapter that fixes the Node as the object;
// github.com/reconkit/reconkit/events provides one.
//
// Threading contract: Event is called from Run's goroutine; it must not
// block (client-go's recorder queues and drops) and must not call back into
// the controller.
type EventRecorder interface {
	Event(eventtype, reason, message string)
}

// Event reasons.
const (
	// EventRegistered: the controller created the Node.
	EventRegistered = "NodeRegistered"
	// EventReRegistered: the Node was deleted by someone else and the
	// controller created it again (Config.ReRegister).
	EventReRegistered = "NodeReRegistered"
	// EventStatusRejected: the API server refused the provider's status
	// for good (see ErrRejected); a reduced status was written.
	EventStatusRejected = "NodeStatusRejected"
)

// Event types, as corev1.EventTypeNormal and EventTypeWarning.
const (
	eventNormal  = "Normal"
	eventWarning = "Warning"
)

type noEvents struct{}

func (noEvents) Event(string, string, string) {}

// Metrics receives one observation per API request the controller makes
// (each retry counts) and per ping of the provider: lease and status writes
// by outcome and HTTP code, heartbeat latency, pings.
// github.com/reconkit/reconkit/prommetrics turns them into collectors.
//
// Threading contract: Observe is called from the controller's worker
// goroutines, possibly concurrently; it must not block and must not call
// back into the controller.
type Metrics interface {
	Observe(Observation)
}

// MetricsFunc adapts a function to [Metrics].
type MetricsFunc func(Observation)

// Observe calls f.
func (f MetricsFunc) Observe(o Observation) { f(o) }

var _ Metrics = MetricsFunc(nil)

type noMetrics struct{}

func (noMetrics) Observe(Observation) {}

// codeOf returns the HTTP status code of a request's result.
func codeOf(err error) int {
	if err == nil {
		return http.StatusOK
	}
	var se apierrors.APIStatus
	if errors.As(err, &se) {
		return int(se.Status().Code)
	}
	return 0
}

// observation builds the observation of one finished request.
func observation(ctx context.Context, call Call, err error, d time.Duration) Observation {
	return Observation{Call: call, Outcome: classify(ctx, err), Code: codeOf(err), Latency: d}
}

// classify maps a request's error to an outcome. ctx is the context of the
// whole operation: a deadline of the request alone is a transient failure,
// the end of Run's context is not a failure at all.
func classify(ctx context.Context, err error) Outcome {
	var se apierrors.APIStatus
	switch {
	case err == nil:
		return OutcomeOK
	case ctx.Err() != nil:
		return OutcomeCanceled
	case apierrors.IsConflict(err), apierrors.IsAlreadyExists(err):
		return OutcomeConflict
	case apierrors.IsNotFound(err):
		return OutcomeNotFound
	case apierrors.IsTooManyRequests(err):
		return OutcomeThrottled
	case errors.As(err, &se):
		if c := se.Status().Code; c >= 400 && c < 500 && c != http.StatusRequestTimeout {
			return OutcomeRejected
		}
	}
	return OutcomeTransient
}

// stopError carries the ErrorHandler's decision to stop Run.
type stopError struct{ err error }

func (e *stopError) Error() string { return e.err.Error() }
func (e *stopError) Unwrap() error { return e.err }

// observe reports one finished request to the metrics hook and, when it
// failed, to the ErrorHandler. It returns err, marked permanent and wrapping
// a *stopError when the handler asks Run to stop; a rejection is wrapped
// with ErrRejected.
func (c *NodeController) observe(ctx context.Context, call Call, start time.Time, err error) error {
	o := observation(ctx, call, err, c.clk.Since(start))
	c.metrics.Observe(o)
	out := o.Outcome
	if err == nil || out == OutcomeCanceled {
		return err
	}
	if out == OutcomeRejected {
		err = fmt.Errorf("%w: %s: %w", ErrRejected, call, err)
	}
	if h := c.cfg.ErrorHandler; h != nil {
		if herr := h(ctx, err); herr != nil {
			return permanent(&stopError{err: herr})
		}
	}
	return err
}
