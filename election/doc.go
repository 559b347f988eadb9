// Package election elects one leader among candidates, on etcd or on a
// Kubernetes Lease, and hands the leader a term that ends the moment
// leadership is lost.
//
// This package holds what hosts and backends share: the [Elector] and
// [Leadership] interfaces, [Token], [LeaderInfo], [Expiring],
// [TermHolder], [Run], the
// [Metrics] and [EventRecorder] hooks, the sentinels and the
// [HealthCheck]. It compiles neither etcd's client nor client-go. The
// backends live in subpackages, so a host compiles only the client it
// uses:
//   - github.com/reconkit/reconkit/election/etcd: etcd.New(etcd.Config{...})
//     campaigns under a key prefix, with terms whose writes etcd itself
//     fences (etcd.Leadership.Guard);
//   - github.com/reconkit/reconkit/election/lease: lease.New(lease.Config{...})
//     campaigns on a coordination.k8s.io/v1 Lease, interoperating with
//     client-go's leaderelection, and lease.GuardedConfig gates a
//     client's writes on a term.
//
// A candidate is an [Elector]. [Elector.Campaign] blocks until the
// candidate leads and returns a [Leadership]: a term with a context that
// ends when the term ends, a fencing [Token] that strictly increases from
// term to term, and [Leadership.Resign]. Most programs do not call
// Campaign themselves but [Run], which campaigns forever, calls the
// program's lead function for every term, and after a loss campaigns
// again instead of ending the process. Tests use the in-memory Elector of
// package electiontest, which also holds the conformance suite both
// backends pass.
//
// # Guarantees and what they rest on
//
// At most one candidate's term context is live at any instant of real
// time, provided the clocks of the candidates and of the server run at
// the same rate within the backend's margin (a tenth of the etcd session
// TTL, at least 500ms; see package election/lease for its own). Clocks need not
// agree on the time of day: every deadline is measured on the local
// monotonic clock from the start of a request the server answered, so a
// term ends locally before the server can hand the election to anybody
// else. A process that is stopped (SIGSTOP, a long GC pause, a suspended
// VM) for longer than that margin can wake up with a term context that
// has not yet noticed its end: the context is a best-effort signal, not a
// proof.
//
// Only the backend's own protocol is covered. Somebody who deletes the
// election's state by hand while a term runs (the Lease on Kubernetes, the
// holder's candidate key or its lease on etcd) hands the election to the
// next candidate at once: it may start a term before the holder's watch
// delivers the delete, and the two terms then overlap for that delivery
// time, or until the holder's next renewal fails if its watch is cut. The
// fence still orders them: the new term's token is higher (for the Lease,
// within the limits package election/lease states for its epoch), so a
// write that checks the token is refused to the old holder.
//
// The proof is fencing. A write is safe from a deposed leader only if the
// system that applies it checks the term at that moment:
//   - on etcd, a transaction guarded by etcd.Leadership.Guard (or made
//     with its Txn or GuardedTxn) is applied
//     only while the holder's candidate key exists, decided by etcd itself in the same
//     revision as the write;
//   - elsewhere, a resource that stores the highest [Token] it has seen and
//     refuses writes that carry a lower one.
//
// Fencing cannot cover writes to a system that checks neither: a request
// already sent to such a system can be applied after the term ended, and
// a Kubernetes write gate (see below) only refuses requests not yet sent.
// Make such writes idempotent, or check the token at the destination.
//
// [Run] releases leadership only after the lead function returned: the
// lead context ends, Run waits for lead (however long, logging when it is
// late), the term context ends, and only then is the release sent. Cancel
// Run's context to step down cleanly. The same order holds for any host
// that campaigns itself: the Campaign context bounds only the wait, and
// an elector's Close ends the term context at once but leaves the release
// to the holder's Resign, so a term is never released behind its holder's
// back. A term whose holder never resigns ends on the server when it
// expires (the etcd session TTL, the Lease duration), as a crashed
// holder's does.
//
// # Cheap leader state and one lifecycle
//
// Both electors answer Leading without a request (term live and before its
// ValidUntil) and LeadingChanged returns a channel closed at the next
// change, so a host neither polls nor asks the server. Both are a
// [TermHolder]: Current returns the term they hold while Leading is true,
// so an object a host keeps across terms (a cloud-controller-manager's
// load balancer implementation) takes the current term's context and
// token at each call rather than from a lead function. Both are built
// with their package's New(cfg), campaign with Campaign or Run, and are
// shut down with Close, which ends a term still held and leaves its
// release to its holder (see above). [Token] is a plain uint64 and
// [ErrLeadershipLost] is the one leadership-lost sentinel of reconkit
// (versiongate.ErrLeadershipLost is the same value), so a term of this
// package is a versiongate.Term as it is.
//
// # Observability
//
// Both configurations take a [Metrics] hook and an [EventRecorder]
// (fields Metrics and Events, nil meaning none). The hook receives an
// [Observation] when a term begins ([EventAcquired], with the campaign's
// Latency and the Handover from the previous holder's end as this
// candidate saw it), at every renewal attempt ([EventRenewed] or
// [EventRenewFailed], with its Latency and the Slack left before
// ValidUntil when it was sent), and when a term ends ([EventLost] with
// its cause, or [EventResigned] for Resign and Close). The recorder gets
// a Normal "LeaderElected", a Warning "LeadershipLost" and a Normal
// "Resigned" event. Both are called from the elector's goroutines and
// must not block.
//
// [HealthCheck] (on both electors, and from [NewHealthCheck] for any
// other) has the semantics of client-go's
// HealthzAdaptor: a candidate holding a term whose context is live
// although it is more than a grace past its ValidUntil is unhealthy
// ([ErrLeaderStale]); a candidate that does not lead, or leads within
// ValidUntil plus the grace, is healthy. The electors end a term at
// ValidUntil themselves, so an unhealthy report means a wedged or starved
// process. It is an http.Handler, and its Check method is a
// controller-runtime healthz.Checker.
package election
