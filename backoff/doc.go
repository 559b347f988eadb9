// Package backoff retries operations and runs periodic loops with exponential
// backoff, jitter and quiet start-up logging.
//
// It is written once here, on top of github.com/cenkalti/backoff/v4, so that
// callers never hand-roll a retry loop. Three entry points cover the common
// shapes:
//
//   - [Retry] calls an operation until it succeeds, the context ends, the
//     operation returns a [Permanent] error, or an optional attempt or time
//     limit is reached ([ErrGaveUp]).
//   - [Every] calls a function periodically, measuring each interval from the
//     end of the previous run, until the context ends or the function returns
//     a [Permanent] error.
//   - [Poll] checks a condition until it holds, a timeout passes
//     ([ErrGaveUp]), the context ends, or the check returns a [Permanent]
//     error. "Not done yet" is not a failure and is not logged; an error from
//     the check is retried like a failed attempt of Retry.
//
// [Renewal] is no loop but the pace of one: the pause before retrying a
// renewal that must succeed before a deadline (a lease's, a term's), for
// loops that keep their own timer. It grows, is capped and jittered as
// Retry's waits are, and brings the last try forward to start before the
// deadline less a reserve.
//
// Each takes its own option type ([RetryOption], [EveryOption],
// [PollOption]); an option that a loop would ignore is not of its type, so
// passing it does not compile. [Option] values (clock, name, logging) fit
// all three.
//
// # Guarantees
//
//   - There is no hidden time limit. cenkalti/backoff/v4 stops retrying after
//     15 minutes by default; Retry never inherits that default and retries
//     until the context ends unless [WithMaxElapsedTime] or [WithMaxAttempts]
//     is given.
//   - All waiting goes through the injected clock ([WithClock]; the real
//     clock by default), so tests on k8s.io/utils/clock/testing.FakeClock are
//     deterministic. Neither function starts a goroutine; both return only
//     after the last call of the operation has returned.
//   - The operation is never called concurrently with itself and always
//     receives the caller's context. Calls happen on the caller's goroutine.
//   - When the context ends, Retry returns an error that wraps both
//     ctx.Err() and the last error of the operation, so errors.Is works for
//     either (a retry that ran out of time has failed). Every, a Run-shaped
//     loop, returns nil when its context ends, as every Run in this module
//     does.
//   - Invalid options are reported as errors wrapping [ErrInvalidOption]
//     before the operation is called; nothing panics on bad input.
//   - A failed attempt is always followed by a wait from the backoff
//     sequence or a positive retry-after hint: whatever a server says, a loop
//     does not spin.
//
// # Request budgets
//
// A loop that talks to a server owes it at most one request per second
// once the server has given the same answer for 30 s, with jitter (see
// BUDGETS.md at the root of the module). Retry meets that with its
// defaults: from 30 s on, at most one call per 24 s, and two loops that
// failed together call at different instants (TestRetryRequestBudget).
// Every and Poll, by default, wait their interval after a failed call as
// after any other (Poll's waits grow only with [WithMultiplier], and Poll
// has no jitter by default). [WithFailureBackoff] makes Every back off its
// failures instead: each failure in a row grows the wait by half, with
// jitter, up to a cap, and the first success returns to the interval
// (TestEveryFailureBackoffBudget). A loop on Every that talks to a server
// uses it, as checkpoint.PollSource does.
//
// Every jitter draw of a loop, and of [Renewal.Pause], comes from the
// source [WithRand] (Renewal.Rand) names, math/rand/v2's global one when
// none is given: a seeded source makes the waits replay
// (TestWithRandDrawsEveryWait).
//
// # Permanent errors
//
// An error is permanent when its chain holds a value with a method
// Permanent() bool that returns true; [Permanent] adds such a marker, and a
// host may give its own error types the method. A *PermanentError of
// github.com/cenkalti/backoff v4 or v5 is recognised too, so code written
// against either major version of that library keeps its meaning here. The
// contract is this package's, not the dependency's: [IsPermanent] is the one
// test.
//
// # Retry-after hints
//
// An operation can ask for a specific wait before its next attempt by
// returning an error built with [RetryAfter], any error whose chain holds a
// value with a method RetryAfter() time.Duration, or a *RetryAfterError of
// github.com/cenkalti/backoff/v5. A host adapts other hints (for example the
// delay a Kubernetes API server suggests through
// k8s.io/apimachinery/pkg/api/errors.SuggestsClientDelay) by wrapping its
// error with [RetryAfter]; this package does not import client libraries.
// Retry and Poll honour hints, and so does Every with [WithFailureBackoff];
// Every without it runs at its interval.
//
//   - A positive hint is a minimum, never a replacement: the next wait is
//     the longer of the hinted wait and the computed backoff. A server that
//     says "retry after 1 s" to a loop already at a 30 s backoff does not
//     bring its next attempt forward. This is what every client in the
//     field does: client-go's REST client (rest/with_retry.go, Before)
//     sleeps the larger of its backoff and the Retry-After, and the
//     Kubernetes API server's hints are floors for a whole fleet of
//     clients, so a hint that shortened waits would herd them back at once.
//   - A hint of zero or less asks for nothing, and the computed wait applies.
//     The API server suggests a delay of 0 for a ServerTimeout; taking that
//     literally would retry in a hot loop.
//   - A hint above the cap set by [WithMaxRetryAfter] (one minute by
//     default) is cut to it, so a misbehaving server cannot stall the caller
//     for long, and the first such hint of a loop is logged. The cap bounds
//     what the hint asks for, not the computed backoff.
//   - The hinted wait is jittered upwards, drawn from [hint, hint*(1+j)]
//     with the loop's jitter factor j, so that the many callers a server
//     throttled together do not all come back at the same instant, and none
//     comes back before it was asked to.
//
// The exponential sequence advances as for any other failure.
//
// # Logging
//
// Logs go to the logr.Logger in the context (logr.FromContextOrDiscard), and
// are kept quiet on purpose, so that a dependency that is simply not up yet
// during start-up does not fill the logs:
//
//   - Failures are not logged during the quiet period ([WithQuietPeriod],
//     two seconds for Retry and Poll, measured on the injected clock from the first
//     attempt). After it, a failure is logged at most once per log interval
//     ([WithLogInterval], ten seconds) with the error, the attempt number and
//     the operation name ([WithName]).
//   - The first success after failures is logged once, at V(0) if a failure
//     of that streak was logged and at V(1) otherwise, so a start-up that
//     settles within the quiet period logs nothing at V(0).
//   - A [Permanent] error is logged once at error level.
//   - Every decision (retry, wait, give up) is logged at V(1).
//
// This package does not bound how long a single call of the operation takes;
// the operation should honour its context and set its own deadlines.
package backoff
