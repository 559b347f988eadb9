// Package ccmfleet runs a cloud-controller-manager built on lbrecon/ccm in
// the fleet simulator (fleetsim): a [Driver] that calls a
// cloudprovider.LoadBalancer for each Service as k8s.io/cloud-provider
// v0.37.1's service controller (controllers/service) does, and, in its
// tests, three replicas of it on one election Lease under the nemesis.
//
// The real service controller cannot run inside a testing/synctest bubble
// (see lbrecon/ccm/ccmtest's documentation: apimachinery's HandleError
// rate limiter, and its own data race), so the Driver repeats its
// decisions instead. Against a real apiserver and the real controller, use
// ccmtest.
//
// # What the Driver does as the controller does
//
// Each one names the test that holds it.
//
//   - Which Services it works on: a Service is queued when it is seen
//     for the first time and wants a load balancer (type LoadBalancer, no
//     loadBalancerClass) or needs cleanup (it has the cleanup finalizer
//     and is being deleted or is no longer of type LoadBalancer); when it
//     changes in a way needsUpdate names (field for field, as upstream)
//     or needs cleanup; and when it is gone from the listing.
//   - Cleanup: GetLoadBalancer first; EnsureLoadBalancerDeleted only if it
//     answered exists; the finalizer removed only once both succeeded; an
//     error from either keeps the finalizer (TestCleanupBeforeTheFinalizerGoes).
//   - Provisioning: the finalizer is written before EnsureLoadBalancer is
//     called (TestFinalizerBeforeEnsure); its status is then written to the
//     Service's status when it differs.
//   - Errors: EnsureLoadBalancer's RetryError is honoured (the key comes
//     back after its delay); every other error, EnsureLoadBalancerDeleted's
//     RetryError included (the controller wraps it with %v), is backed off
//     per Service from 5 s, doubling, to 300 s, and a success resets it
//     (TestFailingBalancerBacksOff).
//   - A Service deleted without the finalizer, or deleted and created
//     again under its name before it was processed, is torn down through
//     the last Service this process processed under that key
//     (processServiceDeletion, processLoadBalancerDelete).
//   - Nodes: every Node not being deleted, not labelled
//     node.kubernetes.io/exclude-from-external-load-balancers, and not
//     tainted ToBeDeletedByClusterAutoscaler (stableNodeSetPredicates);
//     readiness is none of them, so a NotReady node stays a target.
//   - Node sync (nodeSyncLoop's successor in v0.37.1: the node informer's
//     handlers, processNextNodeItem, syncNodes, nodeSyncService): a node
//     added or removed, or updated so that its exclusion label's verdict
//     or its providerID changes (shouldSyncUpdatedNode), queues a node
//     sync; a node turning Ready or NotReady does not, and neither does
//     the informer's periodic resync (100 s), whose updates carry no
//     change. A node sync gives every Service of the serviceCache that
//     wants a load balancer, whose stable nodes differ by name or
//     providerID from the ones it was last given (nodesSufficientlyEqual,
//     lastSyncedNodes, stored before the call and by EnsureLoadBalancer
//     too), an UpdateLoadBalancer call; when that fails and
//     GetLoadBalancer does not answer "not exists", the Service's key is
//     queued at once, with no backoff (TestNodeSync,
//     TestFailedNodeSyncQueuesTheService, TestNodeChurnDoesNotSpin).
//
// # Where it differs (its fidelity's limits)
//
//   - No informers: it lists Services and Nodes every Config.Resync (5 s)
//     and treats what changed between two listings as the informers'
//     events, so it sees at most one change of a Service per listing, and
//     a Service deleted and created again between two listings as an
//     update with a new UID. A failed listing is retried after Resync
//     (TestRefusedListingsDoNotSpin).
//   - Finalizers are added and removed with an Update of the Service
//     preconditioned on the resourceVersion listed, and the status written
//     with UpdateStatus; the controller sends a strategic merge patch of
//     the status subresource, with no precondition. An Update that
//     conflicts is an error backed off like any other.
//   - Node sync runs in the driver's one goroutine, before the Services
//     due at the same listing (as the node worker, acting at once on its
//     informer's event, may run before them), where the controller's node
//     worker runs beside its service workers (so the Balancer is never
//     called for one Service twice at once, and its "another call is
//     changing" RetryError never arises); node changes are seen at the
//     next listing, up to Resync late. No events are recorded; one worker;
//     the serviceCache's data race is not reproduced.
//   - It is not a process: the fleet runs one Driver per leader term, as
//     a cloud-controller-manager that exits when its term ends would, but
//     the Balancer lives across the replica's terms.
//
// # The fleet (fleet_test.go)
//
// Three replicas campaign on the Lease kube-system/cloud-controller-manager;
// the leader runs the Driver over an lbrecon/ccm Balancer with the
// ConfigMap journal, on a provider whose listings come from read replicas
// lagging up to 5 s, whose every call takes 200ms, with asynchronous
// creations (pending for 2 s) and deletions, that refuses an object
// referring to one that does not exist. The Balancer's Admit raises the
// provider's fence (where every replica's writes meet) with a write that
// carries the new term's token and changes nothing; with the default fence
// in memory, a new leader after a deleted Lease read the journal before
// the deposed leader's last creations, made them again, and seeds 15 and
// 16 of 20 left duplicates. Four Services of type LoadBalancer; for 30
// minutes the nemesis crashes and partitions the replicas, restarts the
// apiserver, fails and loses provider answers, causes outages and 429
// bursts, deletes Services and changes their type, and an operator turns
// one Service to ClusterIP for good; node churn, as operator edits at
// times drawn from the seed (nodes_test.go), adds a node and removes it,
// removes one and brings it back, flaps one NotReady and labels one out
// of the load balancers, each undone 20 s to 2 min later, each edit four
// times as often as the ClusterIP edit was before node churn (an
// autoscaling cluster's nodes come and go every minute or so); partitions
// from the provider and outages come twice as often as by default. A
// leader probes its provider every 10 s and, once every probe of its term
// has failed for 30 s (a 429 is an answer, not a failure), hands its
// leadership over with Resign, and again if it is elected within a second
// of that, as a cloud-controller-manager cut from its cloud does so that
// a healthy replica leads; election.Run's pause after such short terms
// keeps them from spinning.
//
// The world is that busy so that a Service's Balancer is called again
// within its creations' lag, where listings that go backwards are the
// danger: four Services, so that a node sync makes four calls one after
// another; calls that take time, so that a node sync's calls and a
// Service's own retries interleave rather than fall on one instant; slow
// creations and replicas, so that more calls fall within a creation's
// lag; and 30 minutes rather than 10, since each such call is a chance,
// not a certainty, for a replica to lag behind one that showed the
// creation.
//
// Checked while the nemesis runs (invariants_test.go), each naming the
// guarantee it checks: NoDuplicate, no two objects at the provider with
// one Service's tag, kind and name for longer than the declared lag and a
// second (lbrecon: a lagging listing never causes a second creation;
// Duplicates); NoLeak, judged at the instant a Service is seen to lose the
// cleanup finalizer (or to be gone): nothing with its tag at the provider
// (lbrecon/ccm: GetLoadBalancer answers "exists" while anything of the
// Service's may be there); and fleetsim's own: FenceOrder (the provider's
// fence never lets a lower token through after a higher one), OneTerm,
// TermChurn, Stops, Lives, and RequestBudget, each replica within 200
// requests a minute to the apiserver and 200 calls to the provider, and 40
// at one instant (the driver lists Services and Nodes at each wake-up,
// and four Services retrying wake it more often than every Resync: the
// unpatched seeds 1 to 60 peaked between 150 and 170 a minute). Once the
// nemesis stops, the quiet period judges the provider against the
// Services the apiserver holds: each LoadBalancer Service has exactly its
// plan's objects, once each; a Service that wants none, or is being
// deleted, has no object and no cleanup finalizer left; no object carries
// a tag other than a Service's that exists (an object of a deleted
// incarnation is leaked). The quiet period allows 2h40m: a 429 burst left
// over is used up only by calls of its verb, at worst one per teardown
// call backed off to 300 s (see quiet in fleet_test.go); a run that
// converges sooner ends sooner. The nemesis leaves out namespace
// deletion.
//
// Its CI seeds (1, 2, 3) run in about 9 s of test time under -race (go
// test -race -count=1 -run '^TestFleet' ./examples/ccmfleet/: 14.5 s with
// TestFleetKnownDefects' two seeds, on a shared two-core machine; 8 to 15
// s with the old 10-minute, two-Service world); each reaches convergence
// at the end of its 30 minutes of faults. What they find of cmd/defects'
// patches (go run ./cmd/defects -baseline -defects NAME, each patch's
// header naming this fleet), no unpatched seed failing:
//   - lbrecon-first-listing (a creation confirmed at the first listing
//     that shows it): in three runs, by 3, 3 and 2 of the three seeds,
//     NoDuplicate (seed 2 at 26s in each run; seeds 1 and 3 at 5m52s to
//     25m45s, varying as the agents' timing does); of seeds 1 to 60, by 58
//     (without the race detector, in the test binary of a patched copy).
//     Two calls for one Service within a creation's lag, the first listing
//     from a replica that shows the creation (the patched reconciler
//     forgets its ack there) and the next from one that does not yet: a
//     node sync's UpdateLoadBalancer and the Service's own retry, or two
//     node syncs, a second or two apart. In the old world (two Services,
//     no latency, 1 s pending, 3 s of lag, node churn a quarter as often,
//     10 minutes) seed 5 alone of seeds 1 to 20 found it; latency brought
//     it to about one seed in two, slower creations and replicas to about
//     five in six, 30 minutes to 58 in 60;
//   - ccm-cleanup-spec (cleanup that maps the Service's spec): by seeds 1
//     and 2, Converges at the end of the quiet period (3h10m: see above);
//   - election-resign-spin (no pause after a resigned term): by all
//     three, at 10m21s, 3m40.7s and 6m36.8s, a replica that handed over
//     winning its Lease again at the same instant, again and again:
//     RequestBudget (41 requests at one instant).
//
// TestFleetKnownDefects keeps a seed that finds an open defect.
package ccmfleet
