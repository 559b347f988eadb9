package nodestatus

import (
	"context"

	corev1 "k8s.io/api/core/v1"
)

// NodeProvider is what a node agent implements so that a NodeController can
// keep its Node healthy in Kubernetes.
type NodeProvider interface {
	// Ping reports whether the node's backend is healthy. The controller
	// calls it every PingInterval on a goroutine of its own, one call at a
	// time, with a context that is cancelled after PingTimeout or when Run
	// ends; Ping must return soon after that context ends. An error sets the
	// node's Ready condition to False (see PingFailurePolicy); it does not
	// stop the lease heartbeat by default.
	Ping(ctx context.Context) error

	// NotifyNodeStatus is called once by Run, before registration, with a
	// callback the provider calls whenever the node's desired labels,
	// annotations, spec or status change. The callback never blocks: it
	// keeps only the newest node, and returns; it may be called from any
	// goroutine, concurrently, and also after Run has returned (the value
	// is then ignored). The spec is used only when the Node is created (at
	// start, or again with Config.ReRegister).
	//
	// Config.Node and the notified nodes combine in one way: Config.Node
	// is the base and every notified node is laid over it, so that nothing
	// the host set in Config.Node is dropped by a notification, and the
	// provider's value wins wherever both set one. Labels, annotations,
	// taints (by key and effect), conditions (by type), capacity and
	// allocatable (by resource) are unions; the provider's addresses of
	// a type replace Config.Node's of that type, and Config.Node's
	// addresses of other types stay; nodeInfo, daemonEndpoints and the
	// other spec and status fields are the provider's where it sets them,
	// else Config.Node's. A provider can therefore remove only what it
	// added itself; to remove a registration label, the host leaves it
	// out of Config.Node.
	//
	// NotifyNodeStatus itself must not block. A provider that starts a
	// goroutine here should stop it when ctx ends.
	NotifyNodeStatus(ctx context.Context, cb func(*corev1.Node))
}

// NaiveNodeProvider is a NodeProvider whose Ping only reports whether its
// context ended and whose status never changes: the node keeps the status it
// was configured with.
type NaiveNodeProvider struct{}

var _ NodeProvider = NaiveNodeProvider{}

// Ping returns ctx.Err().
func (NaiveNodeProvider) Ping(ctx context.Context) error { return ctx.Err() }

// NotifyNodeStatus does nothing: the status never changes.
func (NaiveNodeProvider) NotifyNodeStatus(context.Context, func(*corev1.Node)) {}

// ErrorHandler decides what to do about a failed API call. It is called with
// every failed request: registering, reading or patching the Node, renewing
// the lease, including conflicts the controller resolves itself. A request
// the API server refused for good is wrapped with ErrRejected (use
// apierrors.IsInvalid, IsForbidden... on it for the reason). Returning nil
// means "carry on" (transient failures are retried with backoff, rejected
// ones are not sent again as they were); returning an error stops Run,
// which returns that error wrapped.
//
// It is called on the controller's worker goroutines, possibly concurrently
// for the lease and the status; blocking in it delays only the retry of the
// operation that failed.
type ErrorHandler func(ctx context.Context, err error) error

// Limiter bounds how many controllers sharing it write their Node at once
// (see Config.Limiter). *semaphore.Weighted from golang.org/x/sync
// satisfies it; a process that runs many nodes on one client shares one,
// for example semaphore.NewWeighted(32).
//
// Without one, every node started together registers at once: with a
// thousand nodes that is thousands of requests in flight and their decoded
// replies alive together, which the apiserver's max-in-flight limits may
// answer with 429s and which leaves the process's heap fragmented for good
// (measured in cmd/bench/nodestatus: about twice the memory per node). With
// one, the nodes register in a steady stream, sooner in total.
//
// Acquire must return an error when ctx ends before a unit is free;
// Release returns units taken by a successful Acquire.
type Limiter interface {
	Acquire(ctx context.Context, n int64) error
	Release(n int64)
}
