// Package election elects one leader among candidates, on etcd or on a
// Kubernetes Lease, and hands the leader a term that ends the moment
// leadership is lost.
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
// TTL, at least 500ms; see the Lease backend for its own). Clocks need not
// agree on the time of day: every deadline is measured on the local
// monotonic clock from the start of a request the server answered, so a
// term ends locally before the server can hand the election to anybody
// else. A process that is stopped (SIGSTOP, a long GC pause, a suspended
// VM) for longer than that margin can wake up with a term context that
// has not yet noticed its end: the context is a best-effort signal, not a
// proof.
//
// The proof is fencing. A write is safe from a deposed leader only if the
// system that applies it checks the term at that moment:
//   - on etcd, a transaction guarded by [EtcdLeadership.Guard] (or made
//     with [EtcdLeadership.Txn] or [EtcdLeadership.GuardedTxn]) is applied
//     only while the term's key exists, decided by etcd itself in the same
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
// that campaigns itself: the Campaign context bounds only the wait, so a
// term is never released behind its holder's back.
//
// # Cheap leader state and one lifecycle
//
// Both electors answer Leading without a request (term live and before its
// ValidUntil) and LeadingChanged returns a channel closed at the next
// change, so a host neither polls nor asks the server. Both are built
// with New…(cfg), campaign with Campaign or Run, and are shut down with
// Close, which releases a term still held. [Token] is a plain uint64 and
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
// HealthCheck (on both electors) has the semantics of client-go's
// HealthzAdaptor: a candidate holding a term whose context is live
// although it is more than a grace past its ValidUntil is unhealthy
// ([ErrLeaderStale]); a candidate that does not lead, or leads within
// ValidUntil plus the grace, is healthy. The electors end a term at
// ValidUntil themselves, so an unhealthy report means a wedged or starved
// process. It is an http.Handler, and its Check method is a
// controller-runtime healthz.Checker.
//
// # etcd backend
//
// [NewEtcd] builds an [EtcdElector] from an [EtcdConfig]. Every Campaign
// grants a fresh lease with the session TTL ([DefaultSessionTTL], 10s),
// keeps it alive with a concurrency.Session, and puts a key under the
// prefix in the layout of etcd's concurrency.Election, with the identity
// as its value. The key with the lowest create revision leads; the
// leader's token is that create revision. Tokens strictly increase:
// revisions only grow, a new key's create revision exceeds every existing
// key's, and a candidate leads only once every key created before its own
// is deleted, so each later leader's key was created after every earlier
// leader's.
//
// Before Campaign returns it renews the lease and checks that its key is
// still there, so a session that expired during the wait never yields a
// term (etcd's own Campaign does not check; etcd issue 19597). The term
// ends when the key is deleted, the session ends, or no renewal succeeded
// for the TTL less the margin; a crashed leader is replaced after at most
// the TTL plus the up to 500ms etcd takes to notice an expired lease and a
// round trip. Resign and Close orphan the session and revoke the lease, so
// that a successor leads at once; Resign returns only once the revoke was
// answered, returns its error, and can be called again after a failure.
// The Campaign context bounds the wait only, as in etcd's
// concurrency.Election: a term outlives it, so that the holder releases
// strictly after its own leader work returned.
//
// # Kubernetes Lease backend
//
// [NewLease] builds a [LeaseElector] from a [LeaseConfig]. The election is
// a coordination.k8s.io/v1 Lease in the record format of client-go's
// LeaseLock (holderIdentity, leaseDurationSeconds, acquireTime, renewTime,
// leaseTransitions), taken by client-go's rules, so client-go candidates
// and ours can share one Lease and never both lead: a candidate takes the
// lease when holderIdentity is empty, or once it has seen the record
// unchanged for leaseDurationSeconds on its own clock (the timestamps in
// the record, written by another host's clock, are never compared with the
// local time). Every write carries the resourceVersion it read, so of two
// candidates taking over at once, one gets a conflict. The defaults are
// client-go's: LeaseDuration 15s, RenewDeadline 10s, RetryPeriod 2s.
//
// Followers list the Lease by name once and then watch it: while the watch
// is healthy they send no request at all, take a released lease as soon as
// the release arrives, and take an expired one when a timer set at the
// local expiry instant fires. While the watch fails they poll every
// RetryPeriod.
//
// The leader renews every RetryPeriod, and its term implements [Expiring]:
// ValidUntil is the start of the last renewal a follower can tell apart
// from the one before, plus RenewDeadline; that is LeaseDuration less a
// skew margin of LeaseDuration − RenewDeadline (at least a twentieth of
// LeaseDuration). A follower starts timing a renewal no earlier than the
// server applied it, so the leader's term ends locally before any
// follower may take the lease, as long as the clocks' rates differ by less
// than the margin over one lease duration. Past ValidUntil the term context
// ends with [ErrLeadershipLost] even if no answer came back (a hung
// apiserver), and so does a renewal that finds another holder. A client-go
// follower compares records with times in whole seconds, so renewals
// within one second count from the first of them: keep RenewDeadline
// above RetryPeriod + 1s + a round trip (the defaults leave 7s of slack).
//
// The token is leaseTransitions + 1. Our candidates increment
// leaseTransitions on every term they acquire; client-go increments it only
// when the holder changes, so two consecutive terms of one client-go
// identity share a token. Tokens never decrease in a mixed fleet, unless
// somebody deletes the Lease, which starts the count again.
//
// Resign and Close drop the in-memory leader flag first (as Pinniped's releaseLock does), stop the renewals, and only
// then clear holderIdentity with leaseDurationSeconds 1, as client-go's
// ReleaseOnCancel does, so that any follower takes over at once. A lost
// term is not released.
//
// [GuardedConfig] wraps a rest.Config in a write gate bound to one term:
// every mutating request fails with [ErrNotLeader] unless that term is
// valid at that moment (context live, clock before ValidUntil); reads and
// watches pass. A client built for term N stays closed in term N+1, so a
// goroutine left over from an earlier term cannot write in a later one.
// The gate decides when a request is sent; a request already on the wire
// can still land up to one network delay after the term ended, which is
// what the skew margin is for. For writes that must never land late,
// store the token in the object and update it with a resourceVersion
// precondition. The elector's own client must not be gated.
//
// [LeaseElector.Leader] reads the Lease once and judges it by what this
// candidate has seen: right after a leader crashes, or on the first read
// of a stale Lease, it still names the old holder until the lease expires
// by the local clock, as client-go would.
//
// # Coordinated Leader Election
//
// A Lease candidate always keeps the Strategy and PreferredHolder fields
// of KEP-4355 and ends its term when the Lease names another preferred
// holder, as client-go does. With LeaseConfig.Coordinated it goes
// further: it publishes a coordination.k8s.io/v1beta1 LeaseCandidate
// (its release as binaryVersion) and lets the apiserver's election
// controller pick the holder, adopting the Lease only when named (see
// [Coordinated] for what that rests on). In Kubernetes 1.37 the feature is
// beta and off by default.
//
// # Mixed with client-go on one Lease
//
// Our candidates and client-go's can share a Lease; what each side gets,
// with D, R and P the LeaseDuration, RenewDeadline and RetryPeriod of the
// side that holds:
//   - One of ours holds, client-go follows: our term ends at ValidUntil,
//     R after the last renewal a follower could see, before any follower
//     may take over at D. No overlap, within the clock-rate margin.
//   - client-go holds without ReleaseOnCancel, ours (or client-go's)
//     follow: a holder cut off from the apiserver has its renewal round
//     time out and cancels its OnStartedLeading context up to P + R
//     after its last visible renewal; followers take over at D after
//     they saw it. No overlap if D > R + P (client-go's defaults, 15s,
//     10s and 2s, leave 3s), none of our doing.
//   - client-go holds with ReleaseOnCancel: after the renewal round
//     times out it first tries to release, again bounded by R, and only
//     then cancels the context: up to P + 2R after its last visible
//     renewal (22s at the defaults, 7s into a successor's term). Our
//     followers honour the leaseDurationSeconds the holder wrote, as
//     client-go's do, but that is D, not P + 2R, so honouring it does
//     not cover the gap. LeaseConfig.TakeoverMargin does: our followers
//     then wait D + margin before taking a lease somebody holds (a
//     released lease is still taken at once); a margin of P + 2R − D
//     plus a network delay closes the overlap, at the cost of crash
//     failover that much slower. client-go followers have no such
//     margin, so among client-go candidates the overlap stays.
//
// TestMixedClientGoReleaseOnCancelUnderPartition proves this on a real
// apiserver with D = 4s, R = 3s, P = 0.5s: without a margin the client-go
// holder's context outlived our follower's takeover by about 2s; with a
// 3.5s margin our follower led about 1s after that context ended. Only
// fencing (the token, checked where the write lands) makes a mixed fleet
// safe against every pause and delay.
package election
