// Package lbrecon reconciles a provider's external resources in ordered steps,
// and provides the load-balancer plan (backends, frontends, binds, servers)
// built on it.
//
// A [Reconciler] talks to the provider through an [Engine] (list by ownership
// tag, get, create with tags, destroy, tag). Each [Step] manages one kind of
// object and computes what to create and destroy from the observed objects;
// [Reconciler.Check] returns that [Plan] without changing anything, and
// [Reconciler.Reconcile] applies plans until one is empty.
// [NewLoadBalancer] wires the steps of a [LoadBalancer] description: per port
// a backend and a frontend, per frontend a bind per external address, per
// backend a server per target; [LoadBalancerReconciler.Status] maps external
// addresses to the ports bound on them.
//
// # Guarantees
//
//   - Ownership: only objects carrying [Config.Tag] are changed, plus
//     untagged objects that [Config.Claim] recognises (for the load-balancer
//     plan, by the name suffix and load balancer). Objects with another value
//     of the tag's key, and backends and frontends of other load balancers,
//     are never touched.
//   - Tags are applied as part of creation ([Engine.Create]). If a creation
//     is interrupted before its object is tagged, the next pass finds the
//     object through [Query.Scope] and tags it if a step keeps it, or
//     destroys it otherwise: nothing leaks.
//   - Calls: one List per pass (a List that polled pending objects after the
//     pass's changes serves as the next pass's listing); Get only to poll a
//     few pending objects ([Config.GetPollMax]); one call per created,
//     destroyed, adopted or repaired object. Calls inside a phase run in
//     parallel, at most [Config.Parallelism] at once; there is no global lock.
//   - Order: pending objects are waited for before anything changes;
//     destructions run before creations, later steps first (children before
//     parents), in rounds repeated while a round destroys something. A step's
//     creations wait while a step it depends on ([Step.DependsOn]) still has
//     creations, so every object is created after the objects it refers to
//     exist and have left pending.
//   - Failures are bounded: a failed object is repaired in place once when
//     the engine implements [Repairer], then recreated, at most
//     [Config.FailureBudget] times per Reconcile call, after which Reconcile
//     returns [ErrResourceFailed]. Waits for pending objects end with
//     [ErrPendingTimeout] after [Config.PendingTimeout]; a plan that does not
//     converge ends with [ErrNotConverged] after [Config.MaxPasses].
//   - Errors are classified: not-found answers are final, permanent errors
//     (backoff.Permanent) are not retried, rate-limit errors with a
//     RetryAfter() hint are retried after that hint, other errors are
//     retried up to [Config.CallAttempts] times with exponential backoff.
//   - Every wait goes through [Config.Clock]; when the context ends,
//     Reconcile returns promptly with an error wrapping ctx.Err(), after every
//     call it started has returned. No goroutine outlives a call.
//   - [Metrics] receives every call attempt's verb, outcome and duration, and
//     every Reconcile's, so a host can export counters and histograms without
//     this package importing a metrics library.
//
// # Limits
//
//   - The reconciler is not a lock: two reconcilers with the same tag on the
//     same objects race. Reconcile calls on one Reconciler are serialised.
//   - Steps see one listing. A change made by someone else during a pass is
//     seen on the next pass or the next Reconcile call.
//   - A Create that fails transiently may have created the object anyway; the
//     retry then creates a duplicate, which the next pass destroys (see
//     [Diff]). Engines with idempotent creation avoid the extra calls.
//   - Objects whose specs cannot be compared with == are compared with
//     reflect.DeepEqual.
//   - Tagged servers and binds whose parent is gone are destroyed as
//     orphans; tagged backends and frontends of another load balancer are
//     left alone (moving an owner to another load balancer leaves its old
//     objects for the host to remove).
package lbrecon
