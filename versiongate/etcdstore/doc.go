// Package etcdstore is versiongate's Store on etcd: node records bound to
// etcd leases, the status in one key, and status writes fenced by the
// leader's term in the write's own transaction.
//
// A host that uses another store (the in-memory versiongatetest.Store, or
// its own) imports versiongate alone and compiles no etcd client and no
// gRPC; this package is the one that brings them in. It compiles no
// client-go.
//
// [New] builds a [Store] from an etcd client and a [Config]: the status
// key, the prefix of the node records, and the fence key (by default the
// status key with ".fence" appended). Keys are in the client's keyspace,
// so a namespaced client works.
//
// # Guarantees
//
//   - A record is created only if absent, bound to a lease of its own, so
//     etcd deletes a dead node's record when the lease expires; KeepAlive
//     checks that the record is still bound to the lease.
//   - KeepAlive sends exactly one keep-alive request (clientv3's
//     KeepAliveOnce resends at once for as long as etcd answers
//     Unavailable); the gate paces its retries. Under any answer etcd
//     gives persistently, each loop of a node sends at most one request a
//     second once the answer has lasted 30 s
//     (TestEveryLoopOfEtcdNodesKeepsItsBudget), with the etcd client built
//     with MaxUnaryRetries 1 as election/etcd's documentation asks.
//   - Every read is linearizable, and a listing larger than one page is
//     read at one revision. Watches require a leader, so a watch on a
//     member cut off from the others fails instead of going silent.
//   - WriteStatus applies the term's fence and the "no record changed
//     since" condition in one transaction: a term with an etcd guard
//     ([Guard], as election/etcd's terms have) by its guard, any other term
//     by the fence key, which Fence raises to the term's token and a write
//     needs to hold at most the writer's token.
//   - A guarded term is refused as soon as its key is gone. Only a term
//     whose key the store cannot see at Fence while the term is live (its
//     election on another keyspace or cluster: the elector on the plain
//     client and the store on a namespaced one) is fenced by its token
//     instead, as a term without a guard.
//
// # Limits
//
//   - Tokens must never go back. If they do (a restored etcd backup of the
//     election's cluster, a Lease recreated under an older election), no
//     term can lead until an operator deletes the fence key; the gate
//     reports it with a FencedOff warning naming the key.
//   - Leases are whole seconds, at least one second, and etcd may raise
//     them to its minimum TTL.
package etcdstore
