// Package lease is the Kubernetes Lease backend of package election: one
// leader among candidates that share a coordination.k8s.io/v1 Lease, in
// client-go's record format, so client-go candidates and ours can share
// one Lease.
//
// An [Elector] implements election.Elector and election.TermHolder
// ([Elector.Current]); its terms implement
// election.Leadership and election.Expiring. [GuardedConfig] gates a
// client's writes on a term of either backend. Run, the Metrics and
// EventRecorder hooks, the sentinels and the guarantees this backend keeps
// are those of package election. This package compiles no etcd client and
// no gRPC.
//
// [New] builds an [Elector] from a [Config]. The election is
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
// RetryPeriod plus up to 1.2 × RetryPeriod more, spread at random as
// client-go's candidates spread theirs, so that the followers whose
// watches one apiserver restart ended do not poll in step. A failed
// takeover is retried after such a wait too; of takeovers that meet a
// conflict in a row, only the first is read again at once. Under any
// answer the apiserver gives for good (403, 404, 409, 422, 429, 5xx, a
// watch that fails or ends at once, a refused connection) a candidate
// under election.Run sends at most one request a second after 30s of it,
// leader or follower (TestRequestBudgetUnderPersistentAnswers).
//
// The leader renews every RetryPeriod; after a failed renewal it retries a
// RetryPeriod later, then after pauses that grow by half with up to a fifth
// more at random, the last brought before the term's end, so that a
// RenewDeadline above 30 s keeps the budget too
// (TestRenewalBudgetWithLongRenewDeadline). Its term implements election.Expiring:
// ValidUntil is the start of the last renewal a follower can tell apart
// from the one before, plus RenewDeadline; that is LeaseDuration less a
// skew margin of LeaseDuration − RenewDeadline (at least a twentieth of
// LeaseDuration). A follower starts timing a renewal no earlier than the
// server applied it, so the leader's term ends locally before any
// follower may take the lease, as long as the clocks' rates differ by less
// than the margin over one lease duration. Past ValidUntil the term context
// ends with election.ErrLeadershipLost even if no answer came back (a hung
// apiserver), and so does a renewal that finds another holder. A client-go
// follower compares records with times in whole seconds, so renewals
// within one second count from the first of them: keep RenewDeadline
// above RetryPeriod + 1s + a round trip (the defaults leave 7s of slack).
//
// The token is the Lease's epoch, its metadata.creationTimestamp in Unix
// seconds, in the high 32 bits, and leaseTransitions + 1 in the low 32.
// Our candidates increment leaseTransitions on every term they acquire;
// client-go increments it only when the holder changes, so two
// consecutive terms of one client-go identity share a token. Tokens never
// decrease in a mixed fleet while the Lease lives. Across a delete (a
// common remedy for a stuck controller) the new Lease's token is higher
// when its epoch is a later second than the old one's; when it is the same
// second, its count starts again, and a candidate of ours that takes it
// goes on counting from the highest token it has seen for the Lease (it
// writes leaseTransitions at least that token's count, in the write that
// takes the Lease, under its resourceVersion). So every fence that keeps
// the highest token it has seen accepts the next leader with no operator
// step, exactly when one of these holds:
//
//   - the new Lease's creationTimestamp is a later second than the old
//     one's; or
//   - it is the same second, and the candidate that takes the new Lease
//     saw the old Lease's last term (not merely the old Lease: one that
//     last saw an earlier term counts on from that term's count, below the
//     last one's).
//
// The creationTimestamp is the clock of the apiserver that served the
// create. With one apiserver whose clock does not go back, the first
// condition fails only for a Lease deleted and created again within the
// second it was created in. With HA apiservers it fails whenever the
// apiserver that serves the create runs behind the one that created the
// old Lease by at least the old Lease's age: two apiservers whose clocks
// are 1 s apart send the epoch back for a Lease deleted and created again
// within about a second of its creation, and give it the same epoch within
// about two. What then sends a token back: such a Lease taken by a
// client-go candidate, or by one of ours that did not see the old Lease's
// last term (a process started after the deletion keeps no memory across
// restarts); an apiserver clock that went back by more than the time
// between the delete and the create; and an etcd backup restored under
// the apiserver (which brings back an older Lease). A fence that sees a
// token go back should say so loudly (versiongate's kubestore does:
// *versiongate.FencedOffError).
//
// Resign drops the in-memory leader flag first (as Pinniped's releaseLock
// does), stops the renewals, and only then clears holderIdentity with
// leaseDurationSeconds 1, as client-go's ReleaseOnCancel does, so that any
// follower takes over at once. Close drops the flag and stops the renewals
// at once, but leaves the release to the holder's Resign, so that it never
// releases a term whose holder may still be acting on it; a term never
// resigned expires. A lost term is not released.
//
// [GuardedConfig] wraps a rest.Config in a write gate bound to one term:
// every mutating request fails with election.ErrNotLeader unless that term is
// valid at that moment (context live, clock before ValidUntil); reads and
// watches pass. A client built for term N stays closed in term N+1, so a
// goroutine left over from an earlier term cannot write in a later one.
// The gate decides when a request is sent; a request already on the wire
// can still land up to one network delay after the term ended, which is
// what the skew margin is for. For writes that must never land late,
// store the token in the object and update it with a resourceVersion
// precondition. The elector's own client must not be gated.
//
// [Elector.Leader] reads the Lease once and judges it by what this
// candidate has seen: right after a leader crashes, or on the first read
// of a stale Lease, it still names the old holder until the lease expires
// by the local clock, as client-go would.
//
// # Coordinated Leader Election
//
// A Lease candidate keeps the Strategy field of KEP-4355 and ends its term
// when the election controller names another preferred holder during it,
// as client-go does. Like client-go's uncoordinated elector, a candidate
// without Config.Coordinated clears PreferredHolder when it acquires and
// renews the Lease, so a value left over (after a preemption and a Resign,
// or after a fleet turned the feature off) never makes it yield at every
// renewal. With Config.Coordinated it keeps the field, and goes
// further: it publishes a coordination.k8s.io/v1beta1 LeaseCandidate
// (its release as binaryVersion) and lets the apiserver's election
// controller pick the holder. It never adopts a term it did not take
// itself: it adopts the Lease at once only when its own watch saw the
// controller name it (a state naming its identity without an acquireTime,
// right after one naming another holder or none), and any other Lease
// under its identity (a predecessor's with the same pod name, ours or
// client-go's, which keeps the controller's empty acquireTime while it
// holds) only once it expired by its own clock, with a new transition
// (see [Coordinated] for what that rests on). Still, a client-go candidate
// adopts any Lease that names its identity, ours included: where
// client-go candidates take part, give each process an identity of its own (as
// election.DefaultIdentity does). In Kubernetes 1.37 the feature is beta
// and off by default.
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
//     not cover the gap. Config.TakeoverMargin does: our followers
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
package lease
