// Package reconkit is a library of reconciliation primitives for custom node
// agents and small control planes built on etcd and Kubernetes.
//
// The packages are independent; a host imports the ones it needs and wires
// them together itself. No feature package imports another; the one leaf
// they share is backoff, so that none of them hand-rolls a retry loop and
// every loop logs the same quiet way.
//
//   - [github.com/reconkit/reconkit/election]: leader election on etcd and on
//     Kubernetes Leases. Leadership is a context that ends when it is lost,
//     carries a fencing token, and guards writes so that a deposed leader
//     cannot act.
//   - [github.com/reconkit/reconkit/versiongate]: mixed-release clusters. Nodes
//     publish their release in etcd; only the newest-release node reconciles,
//     and only once no incompatible node remains; WaitReady keeps a node from
//     serving state it cannot handle.
//   - [github.com/reconkit/reconkit/nodestatus]: registers a Kubernetes Node,
//     heartbeats it with a Lease and patches its status three-way so that
//     conditions written by others survive.
//   - [github.com/reconkit/reconkit/lbrecon]: converges external resources,
//     such as a load balancer's frontends, backends, binds and servers, in
//     ordered steps, destroying before creating and waiting out pending
//     resources.
//   - [github.com/reconkit/reconkit/checkpoint]: crash-safe on-disk
//     checkpoints of assigned configuration with a trial period and automatic
//     rollback to the last-known-good configuration.
//   - [github.com/reconkit/reconkit/backoff]: retry and periodic loops with
//     quiet start-up logging.
//
// A typical node agent boots its configuration through checkpoint, registers
// itself with nodestatus, publishes its release and waits in versiongate,
// campaigns with election, and, while leading, runs a version-gated reconcile
// that converges external resources with lbrecon. The program in
// examples/nodeagent does exactly that.
package reconkit
