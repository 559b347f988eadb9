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
//     cannot act. The backends are its subpackages
//     [github.com/reconkit/reconkit/election/etcd] and
//     [github.com/reconkit/reconkit/election/lease], so a host compiles only
//     the client it uses.
//   - [github.com/reconkit/reconkit/versiongate]: mixed-release clusters. Nodes
//     publish their release in a store (on etcd:
//     [github.com/reconkit/reconkit/versiongate/etcdstore]); only the
//     newest-release node reconciles, and only once no incompatible node
//     remains; WaitReady keeps a node from serving state it cannot handle.
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
//   - [github.com/reconkit/reconkit/prommetrics]: Prometheus collectors
//     for every package's Metrics hook, in one call (Agent) or one
//     subpackage per hooked package.
//   - [github.com/reconkit/reconkit/healthz]: the packages' named health
//     checks served as one /healthz, in the Kubernetes components' format.
//
// A typical node agent boots its configuration through checkpoint, registers
// itself with nodestatus, publishes its release and waits in versiongate,
// campaigns with election, and, while leading, runs a version-gated reconcile
// that converges external resources with lbrecon. The program in
// examples/nodeagent does exactly that.
//
// # Conventions every package follows
//
//   - Lifecycle: a long-running type is built by a constructor that checks
//     its configuration, and has Run(ctx) error, which blocks until every
//     goroutine it started has exited. Run returns nil when its context
//     ends, as controller-runtime's manager does, and a wrapped error only
//     for a real failure; a host needs no "ignore context.Canceled" filter.
//     A type that holds resources beyond Run also has Close.
//   - One vocabulary: a fencing token is a uint64 (election.Token is an
//     alias); a term of leadership is election.Leadership, one interface
//     shared by every package that takes leader work; leadership loss is
//     one sentinel that errors.Is matches whichever package returned it.
//   - Observability: each package takes a one-method Metrics hook (with a
//     Func adapter) and an optional EventRecorder with one method set,
//     Event(eventtype, reason, message string), so one host value serves
//     every package. No feature package imports a metrics library.
//   - Dependencies come from the host: clients, clock (k8s.io/utils/clock),
//     logger (logr, from the context), metrics, and the random source of
//     jittered pauses (a Rand func() float64 in the Config or options of
//     backoff, election, versiongate, kubestore, nodestatus, checkpoint,
//     configmapsource and lbrecon; nil draws from math/rand/v2's global
//     source, which cannot be seeded). Nothing else is global.
package reconkit
