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
// Run's context to step down cleanly.
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
// round trip. Resign, Close and the end of the Campaign context orphan the
// session and revoke the lease, so that a successor leads at once.
//
// # Kubernetes Lease backend
//
// (This section describes the Lease backend.)
package election
