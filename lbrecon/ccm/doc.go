// Package ccm implements k8s.io/cloud-provider's LoadBalancer
// over an lbrecon [lbrecon.Engine], for cloud-controller-managers.
//
// A [Balancer] keeps one lbrecon reconciler per Service (by UID) across
// calls, and maps each Service and the nodes the service controller gives
// to a load balancer through the host's [Mapping]. Objects carry the
// ownership tag "<TagKey>=<Service UID>". Intents can be journaled on the
// Service itself with [ServiceJournal]: the journal lives here, not in a
// package of its own, because the Service is the object this package
// manages and its only other dependency, client-go, the service
// controller needs anyway.
//
// # Guarantees
//
//   - Non-blocking: every call but EnsureLoadBalancerDeleted makes one
//     lbrecon pass (ReconcileOnce: one List and at most one round of calls
//     per phase, each call within Reconciler.CallTimeout) and never waits
//     on the clock. EnsureLoadBalancerDeleted makes TeardownOnce passes,
//     waiting each pass's RequeueAfter between them, while the teardown
//     only waits for the provider (no failure a wait may cure, objects to
//     destroy or deletions to see) and the next pass fits, at the last
//     pass's duration, before Config.TeardownWait (default
//     Reconciler.CallTimeout) from the call's start: it starts no pass
//     after that, so it returns within TeardownWait unless its last pass
//     takes longer than the one before (then within that pass's own
//     bound, one CallTimeout, past it). A pass that meets a transient
//     failure ends the call at once; a negative TeardownWait makes one
//     pass per call. See Limits for why. While the load balancer is not confirmed by a listing,
//     EnsureLoadBalancer and UpdateLoadBalancer return an api.RetryError
//     with the pass's RequeueAfter (always positive), which the service
//     controller honours for EnsureLoadBalancer. A call that finds another
//     call for the same Service in progress returns a RetryError at once
//     instead of waiting for it.
//   - Errors are not masked: a pass that failed part-way returns that
//     failure, naming the Service, the load balancer, and lbrecon's verb
//     and object ("create server/n3.http.<uid>"), even when the load
//     balancer exists and a Get would look fine. Failures a wait may cure
//     come inside the RetryError (errors.Is finds them); the others are
//     plain errors, which the service controller backs off exponentially.
//     GetLoadBalancer reports the load balancer as existing while anything
//     of the Service's may be at the provider (listed objects, creations
//     no listing confirmed yet, journaled intents, a pass of this process
//     not yet converged), so the service controller neither drops an
//     UpdateLoadBalancer error nor skips EnsureLoadBalancerDeleted.
//   - Fencing: every call takes the fencing token of the current leader
//     term from Config.Token and puts it in the context
//     (lbrecon.WithToken); every write goes through lbrecon.Guard with
//     lbrecon.CheckToken(Config.Admit). Without a token nothing is
//     written; a token below the fence's is refused with lbrecon.ErrFenced.
//     The engine reads the token with lbrecon.TokenFrom to send it with a
//     provider's conditional writes.
//   - Ownership: only objects carrying the Service's tag are changed or
//     destroyed (lbrecon's rules: untagged objects are adopted only when
//     exactly those about to be created, never destroyed). A Service whose
//     load balancer ID changes gets a new reconciler; the objects left on
//     the old ID are torn down once the new one converged, also after a
//     restart (lbrecon.Leftovers, found by the tag).
//   - Deletion: EnsureLoadBalancerDeleted tears down children before
//     parents, waits for asynchronous deletes without re-issuing them,
//     returns nil only once a listing shows nothing of the Service's tag
//     left on any load balancer, and is idempotent (a later call, in this
//     process or another, lists nothing and returns nil).
//   - Crashes: with a journal, a process started after a crash knows the
//     creations its predecessor sent (lbrecon's intents), also in
//     GetLoadBalancer, and does not create them again on a lagging
//     provider. ServiceJournal writes with JSON merge patches
//     preconditioned on the resourceVersion it read, and reads with GETs
//     that no cache serves.
//
// # Nodes and externalTrafficPolicy
//
// The Mapping receives the node list exactly as the service controller of
// k8s.io/cloud-provider v0.37 passes it: every node except those being
// deleted, those labelled node.kubernetes.io/exclude-from-external-load-balancers,
// and those tainted ToBeDeletedByClusterAutoscaler. The controller does
// not filter by readiness (since the StableLoadBalancerNodeSet change) nor
// by where the Service's endpoints run, and it passes the same list for
// externalTrafficPolicy Local and Cluster: with Local, the provider's
// health check against spec.healthCheckNodePort is what keeps traffic off
// nodes without endpoints. [NodeTargets] therefore uses every node given.
// lbrecon's load-balancer plan has no health-check object: an engine for a
// provider that needs one configures it itself (the Mapping may put the
// port in the load balancer's ID or Suffix, or the host may keep it
// elsewhere). A Mapping must not filter by endpoints: the controller
// calls again on node changes only, not on endpoint changes.
//
// # Limits
//
//   - The service controller wraps EnsureLoadBalancerDeleted's error with
//     %v, so it does not see a RetryError there and backs it off
//     exponentially (5 s, 10 s, 20 s, ...). A teardown needs several
//     passes (children, then parents, each once a listing shows
//     asynchronous deletes done), so EnsureLoadBalancerDeleted runs them
//     within one call, for up to TeardownWait: a teardown that fits
//     converges in one call (against the real service controller, a
//     four-pass teardown with 200 ms deletes and 300 ms list lag took 2 s
//     instead of about 110 s), one that does not, or meets a transient
//     failure, still takes the controller's backoff for each further call,
//     and the call holds a worker for up to TeardownWait. A shorter
//     TeardownWait bounds the worker's time and lengthens such teardowns.
//   - The plan has no protocol: a Service with TCP and UDP on one port is
//     refused by [ServicePorts].
//   - A Service's annotations are bounded to 256 KiB by the apiserver:
//     about a thousand intents in flight at once.
//   - Two Balancers (two processes) must not manage one Service at once;
//     the fence keeps a deposed term from writing, if Admit holds the
//     newest token where both can see it (in memory it holds only this
//     process's).
//
// # Dependencies
//
// This package imports k8s.io/cloud-provider's root and api packages. The
// root package imports client-go's informers, every API group's: go list
// -deps counts 723 packages here, against 478 for lbrecon with client-go's
// typed core client alone. Its tests run the real service controller in a
// process of their own (internal/cmd/servicecontroller, built without the
// race detector: the controller has a data race of its own), its load
// balancer calls forwarded over HTTP (internal/lbwire) to a Balancer in
// the test process, which runs under the race detector; that program adds
// k8s.io/component-base (Prometheus metrics, feature gates) to the
// module's requirements. lbrecon and lbrecontest compile no k8s.io package
// beyond k8s.io/utils; a test keeps it so.
package ccm
