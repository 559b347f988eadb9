// Command versiongate compares the cost of versiongate's stores side by
// side in one run, each on a real server it builds and starts itself: the
// Kubernetes store (package versiongate/kubestore) on a kube-apiserver,
// and the etcd store (package versiongate/etcdstore) on that apiserver's
// own etcd. It measures:
//
//   - steady state: requests per node per minute that a fleet of running
//     gates sends once every node is ready and the leader is done, counted
//     on the wire (HTTP requests on the Kubernetes side, a watch counting
//     once when it starts; gRPC calls and stream messages on the etcd side)
//     and as store calls;
//   - telling old nodes: the time from a status write returning to every
//     one of the nodes watching the status having seen it (how long until
//     every old node is told of a restrict), over several rounds;
//   - a large gate: the servers' CPU time per second and resident memory
//     while that many gates run (apiserver and its etcd together on the
//     Kubernetes side, etcd alone on the etcd side), read from /proc of
//     the server processes; beside them this process's own CPU and RSS
//     (every gate's client), the bytes the clients receive per node (what
//     the watches fan out, also what a store reads and drops), the time
//     until every gate is ready and the p99 latency of record renewals. A
//     backend that cannot carry the large gate gets "failed" in its
//     column and the reason below the table; the others still run.
//
// What is simulated: every gate runs in this process, so on a small
// machine the clients compete with the servers they measure; compare the
// columns with each other rather than with a production cluster. A
// hundred gates share one client and so one connection (one HTTP/2
// connection to the apiserver, one gRPC connection to etcd), where a fleet
// has one per node: the servers here hold fewer connections and TLS
// sessions than they would. Each gate is still one node's view with its
// own requests and watches, so the requests and watch streams the servers
// serve are a fleet's. Gates start at -start-rate per second, not all at
// once as after a fleet-wide restart. Every run uses one TTL (-ttl) and
// the node-Lease mode nodestatus's default renewal interval.
//
// Usage:
//
//	go run ./cmd/bench/versiongate [-nodes 50] [-window 1m] [-watchers 50] [-rounds 20]
//	    [-big 1000] [-big-window 1m] [-skip-big] [-ttl 10s] [-only kube|nodelease|etcd]
//	    [-start-rate 50] [-ready-timeout 2m] [-v 1]
//
// The Kubernetes store runs in both record modes: a Lease per record kept
// alive by the store, and records on node Leases (Config.NodeLease) that
// a nodestatus controller per node renews; nodestatus alone is measured
// too, so that the gate's extra on top of the node's heartbeat shows.
package main
