// Package etcd is the etcd backend of package election: one leader among
// candidates that share an etcd key prefix, with terms whose writes etcd
// itself fences.
//
// An [Elector] implements election.Elector and election.TermHolder
// ([Elector.CurrentEtcd] gives the concrete term); its terms are [*Leadership]
// values, which implement election.Leadership and election.Expiring and
// add the comparison and transactions that make etcd refuse a write once
// the term has ended ([Leadership.Guard], [Leadership.Txn],
// [Leadership.GuardedTxn]). Run, the Metrics and EventRecorder hooks, the
// sentinels (election.ErrLeadershipLost, election.ErrNotLeader, ...) and
// the guarantees this backend keeps are those of package election. This
// package compiles no client-go.
//
// [New] builds an [Elector] from a [Config]. Every Campaign
// grants a fresh lease with the session TTL ([DefaultSessionTTL], 10s),
// keeps it alive with a concurrency.Session, and puts a key under the
// prefix in the layout of etcd's concurrency.Election, with the identity
// as its value: the candidate key ([Leadership.Key]). The key with the lowest create revision leads; the
// leader's token is that create revision. Tokens strictly increase:
// revisions only grow, a new key's create revision exceeds every existing
// key's, and a candidate leads only once every key created before its own
// is deleted, so each later leader's key was created after every earlier
// leader's. While a candidate waits, it watches the key just ahead of
// its own; a watch that fails or ends early, or a read of the keys ahead
// that fails, is tried again after a pause that grows from 100ms to 5s,
// and the candidate keeps its key, and so its place in the queue, for as
// long as its session lives.
//
// Before Campaign returns it renews the lease and checks that its key is
// still there, so a session that expired during the wait never yields a
// term (etcd's own Campaign does not check; etcd issue 19597). The term
// ends when the key is deleted, the session ends, or no renewal succeeded
// for the TTL less the margin; a crashed leader is replaced after at most
// the TTL plus the up to 500ms etcd takes to notice an expired lease and a
// round trip. A failed renewal is tried again after 500ms, growing by half
// each time up to TTL/3, each pause up to a fifth longer at random so that
// terms failed by one outage retry apart; the try that would fall past the
// validity is brought forward to start at least 250ms before it. A term watches its key; a watch that ends early
// is re-established after a pause that grows from 500ms to the TTL, so a
// server that ends every watch at once costs at most a read and a watch
// per TTL, while every renewal still checks the key. Resign orphans the session and revokes the lease, so that a
// successor leads at once; it returns only once the revoke was answered,
// returns its error, and can be called again after a failure. Close ends
// the term at once and stops its keepalives but leaves the revoke to the
// holder's Resign, so that it never releases a term whose holder may still
// be acting on it; a term never resigned ends by its lease's TTL.
// The Campaign context bounds the wait only, as in etcd's
// concurrency.Election: a term outlives it, so that the holder releases
// strictly after its own leader work returned.
//
// # Request budget
//
// Under any answer etcd (or a proxy before it) gives persistently
// (Unavailable, ResourceExhausted, PermissionDenied, Unauthenticated,
// DeadlineExceeded, refused connections, watches that end at once or are
// compacted), each elector run by election.Run sends at most one request a
// second once the answer has lasted 30 s, with jitter: renewals are single
// keep-alive requests retried by the term's backoff (clientv3's
// KeepAliveOnce is not used, since it resends at once for as long as the
// answer is Unavailable), and reads and watches back off as above
// (TestEtcdRequestBudgetUnderPersistentAnswers, BUDGETS.md). Two loops
// belong to the etcd client, not to the elector, and the host configures
// them: the client resends a read answered Unavailable up to
// clientv3.Config.MaxUnaryRetries times (100 by default), 25 ms apart, so
// a host that wants the budget to hold on the wire sets it low (1 sends
// each request once and leaves retrying to the elector's backoff); and the
// client reopens its keep-alive and watch streams on its own, on the real
// clock.
package etcd
