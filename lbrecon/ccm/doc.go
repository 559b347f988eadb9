// Package ccm implements k8s.io/cloud-provider's LoadBalancer over an
// lbrecon [lbrecon.Engine], for cloud-controller-managers.
//
// A [Balancer] keeps one lbrecon reconciler per Service (by UID) and
// load-balancer ID across calls, and maps each Service and the nodes the
// service controller gives to a load balancer through the host's
// [Mapping]. The Mapping describes either a load balancer that exists
// (lbrecon.LoadBalancer.ID names it, its addresses known in advance) or,
// with lbrecon.LoadBalancer.Provision, one the plan creates first, whose
// address and DNS name the provider assigns (lbrecon.LoadBalancerStatus):
// EnsureLoadBalancer publishes them in the Service's status once known.
// Objects carry the ownership tag "<TagKey>=<Service UID>".
// A [Journal] keeps the creations about to be sent (lbrecon's intents)
// where a successor finds them: [ConfigMapJournal] in ConfigMaps owned by
// the Service, or, as an explicit choice of none, [MemoryJournal].
//
// # Guarantees
//
// Each guarantee names the test that holds it.
//
//   - Cleanup never depends on the spec: GetLoadBalancer and
//     EnsureLoadBalancerDeleted work from the Service's UID, namespace and
//     name, what the provider lists with its tag (on any load-balancer
//     ID) and what the journal holds, never from ports or node ports. So
//     after type LoadBalancer -> ClusterIP (node ports dropped) every
//     object goes and the controller then removes the finalizer, in this
//     process or a new one (TestCleanupAfterTypeChangeNeedsNoSpec,
//     TestServiceControllerCleanupNeedsNoSpec against the real controller).
//   - A Service the plan cannot express (two protocols on one port number;
//     spec.allocateLoadBalancerNodePorts false) is refused by
//     EnsureLoadBalancer with an [ErrUnsupportedService] error naming the
//     field, never a RetryError, and deleting it completes
//     (TestUnsupportedServiceIsRefusedByFieldAndDeletes,
//     TestServiceControllerCleanupNeedsNoSpec).
//   - GetLoadBalancer answers "exists" while anything of the Service's may
//     be at the provider: a call or a pass of this process not torn down,
//     an object listed with its tag, or any journal entry, so a new
//     process on a lagging listing never answers "does not exist" while a
//     creation it cannot see may have happened, and the service controller
//     neither skips EnsureLoadBalancerDeleted nor drops an
//     UpdateLoadBalancer error (TestNewProcessDeleteCountsTheJournal,
//     TestPartialUpdateErrorsAreNotMasked).
//   - Non-blocking: EnsureLoadBalancer and UpdateLoadBalancer make one
//     lbrecon pass (ReconcileOnce: one List and at most one round of calls
//     per phase, each pass within Reconciler.CallTimeout), plus, after a
//     move and until the old load balancers are gone, one teardown pass of
//     each, and never wait on the clock
//     (TestEnsureHoldsNoWorkerLongerThanACall); a converged Service costs
//     one provider List per call (TestConvergedCallCostsOneList); while the load
//     balancer is not confirmed by a listing they return an api.RetryError
//     with the pass's RequeueAfter, always positive
//     (TestEnsureReturnsRetryErrorUntilConverged). EnsureLoadBalancerDeleted
//     makes one teardown pass per call by default and returns a RetryError
//     ("call again after D") until a listing shows nothing of the
//     Service's left (TestDeleteMakesOnePassPerCallByDefault). Once one
//     does, and nothing is left but the confirmation of the destructions
//     it sent (lbrecon.Result.Confirming), it waits for that inside the
//     call on Reconciler.Clock, at most the list lag and
//     (ListLagListings+1) PollIntervals, never past one
//     Reconciler.CallTimeout from the call's start nor past its context's
//     deadline, and returns nil only once a listing at the horizon
//     confirmed it (TestDeleteWaitsForTheConfirmationInsideTheCall,
//     TestDeleteConfirmationWaitEndsWithinCallTimeout,
//     TestDeleteConfirmationWaitEndsWithinTheContext); the wait lists at
//     most once per PollInterval, and a journal failing to forget ends it
//     at once (TestDeleteConfirmationWaitDoesNotSpin). A negative
//     TeardownWait waits for nothing
//     (TestDeleteWithNegativeTeardownWaitWaitsForNothing); a positive
//     Config.TeardownWait lets it go on within that time
//     (TestDeleteConvergesWithinOneCallWithTeardownWait,
//     TestDeleteCallEndsWithinTeardownWait), stopping at the first failure
//     a wait may cure (TestDeleteCallStopsAtATransientFailure). A call that
//     finds another call for the same Service in progress returns a
//     RetryError at once.
//   - Errors are not masked: a pass that failed part-way returns that
//     failure, naming the Service, the load balancer, and lbrecon's verb
//     and object ("create server/n3.http.<uid>"); failures a wait may cure
//     come inside the RetryError (errors.Is finds them), the others are
//     plain errors, which the service controller backs off exponentially
//     (TestPartialUpdateErrorsAreNotMasked).
//   - Fencing: every call takes the fencing token of the current leader
//     term from Config.Token and puts it in the context
//     (lbrecon.WithToken); every write goes through lbrecon.Guard with
//     lbrecon.CheckToken(Config.Admit). Without a token nothing is written;
//     a token below the fence's is refused with lbrecon.ErrFenced
//     (TestWritesCarryTheTermsToken).
//   - A new term begins with its fence: the first call that brings a
//     token the Balancer has not seen calls Config.Admit with it before it
//     reads anything; every Service's reconciler, kept, then begins the
//     term itself (lbrecon's Terms): it drops what it kept from the
//     earlier term and reads the journal again before it lists. So the
//     deposed term's writes are refused from before the new term reads
//     the journal, and nothing the other replica's term created in
//     between is missed (TestNewTermRaisesTheFenceBeforeReading; the goal
//     test made duplicates in 14 runs of 100 when the fence learned the
//     new term only from its first write). Each reconciler raises the
//     fence again as it begins the term (Config.Admit is also its
//     lbrecon.Config.Admit): the Balancer raises it once per term, so a
//     replica deposed after that, at its first call for a Service in the
//     term, is refused before it reads the journal or lists
//     (TestDeposedReplicaReadsNothingForANewService).
//   - The load balancer itself: with Provision, EnsureLoadBalancer returns a
//     RetryError until the plan converged, which includes the provider
//     having assigned the load balancer's address or DNS name; it then
//     publishes the address as the ingress IP (through the Mapping's
//     Status) with the DNS name as its hostname, or the DNS name alone
//     (TestProvisionPublishesTheAssignedAddressOnceKnown). A load balancer
//     someone deleted is created again on the next call, which publishes
//     the new address (TestProvisionRecreatesAndRepublishes). Deleting the
//     Service destroys the children before the load balancer
//     (TestProvisionDeleteTearsDownChildrenFirst).
//   - Ownership: only objects carrying the Service's tag are changed or
//     destroyed; another Service's, an operator's and another tool's
//     objects on the same load balancer stay
//     (TestDeleteTearsDownOnlyWhatTheServiceOwns).
//   - Moves: a Service whose load-balancer ID changes gets a reconciler
//     for the new ID; nothing of the old one is destroyed before the new
//     one converged; once it did, EnsureLoadBalancer returns its status
//     whatever the old one does, and the old one is torn down on that and
//     the Service's later calls by the old ID's own reconciler (which
//     holds its creations of unknown outcome, so a late creation is
//     destroyed once it shows), then by the tag on every other ID, also
//     after a restart (TestServiceMovesToAnotherLoadBalancerID,
//     TestMovePublishesWhileTheOldResists,
//     TestMoveSweepsALateCreationOnTheOldID). Each ID has its own journal
//     entries (TestConfigMapJournalScopesDoNotShare).
//   - Crashes: with a journal, a process started after a crash knows the
//     creations its predecessor sent, in EnsureLoadBalancer and in
//     GetLoadBalancer and EnsureLoadBalancerDeleted, and does not create
//     them again on a lagging provider (TestRestartWithTheJournal,
//     TestCrashAtEveryWriteWithTheConfigMapJournal on the real apiserver).
//   - The ConfigMap journal fits any Service: shards of at most
//     ConfigMapJournalOptions.ShardBytes (512 KiB by default, under the
//     apiserver's 1 MiB), a 5,000-node Service with 4 ports (20,012 intents, about 5 MB) in 10, never
//     written to the Service itself, so no journal write re-queues the
//     Service or reaches kube-proxy (TestConfigMapJournalFitsA5000NodeService,
//     TestConfigMapJournalOnTheRealAPIServer). Writes are preconditioned on
//     the resourceVersion read, and a concurrent writer's intents are kept
//     (TestConfigMapJournalKeepsAConcurrentWritersIntents); on a conflict
//     it reads again and retries while each read finds another writer's
//     change, and gives up (to be retried by the next pass) after 3 reads
//     in a row that find none (TestConfigMapJournalBusyWriterDoesNotMakeItGiveUp,
//     TestConfigMapJournalEndlessConflictsGiveUp). Shards an operator
//     deletes mid-term lose no intent the process holds: its next journal
//     write writes them again and Load returns them, so a successor
//     creates nothing twice, and a forgotten one is not brought back
//     (TestConfigMapJournalShardDeletedMidTerm,
//     TestConfigMapJournalEditsOnTheRealAPIServer). A write the
//     apiserver refuses as invalid, too large or forbidden is a permanent
//     [ErrJournalRefused] error saying what to do, and nothing is created
//     (TestConfigMapJournalRefusalIsPermanent). A shard that is not a
//     journal is an lbrecon.ErrCorruptJournal error naming it, left for an
//     operator (TestConfigMapJournalCorruptShard, FuzzConfigMapJournalLoad).
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
// nodes without endpoints. [NodeTargets] (lbrecon/nodetargets.From over
// the controller's pointers) therefore uses every node given.
// [ServiceHealthCheck] gives a Mapping that health check
// (healthCheckNodePort, path /healthz) as lbrecon.LoadBalancer.HealthCheck:
// a health-check object per backend, which switching Cluster and Local
// creates or destroys alone (TestProvisionLocalAddsOnlyTheHealthCheck).
// A Mapping must not filter by
// endpoints: the controller calls again on node changes only, not on
// endpoint changes.
//
// # What the service controller does with the answers
//
// Judged against k8s.io/cloud-provider v0.37.1's controllers/service:
// for a Service that wants no load balancer, or is being deleted with the
// finalizer, it calls GetLoadBalancer, then EnsureLoadBalancerDeleted only
// if that answered exists, then removes the finalizer: an error from
// GetLoadBalancer keeps the Service (and its finalizer) for ever, and a
// wrong "does not exist" leaks the load balancer. It wraps
// EnsureLoadBalancerDeleted's error with %v, so it backs a RetryError off
// exponentially (5 s, 10 s, 20 s, ... up to 300 s) rather than honouring
// its delay: a teardown of several passes (children, then parents, each
// once a listing shows deletes done) costs that backoff between calls,
// which TeardownWait trades against a worker held. EnsureLoadBalancer's
// RetryError it honours (AddAfter), as it does EnsureLoadBalancerDeleted's
// on its other path (a Service deleted without the finalizer). Every
// error it records as a Warning event on the Service.
//
// So a call that returned a RetryError only to have the confirmation of
// its destructions (a listing the lag after the one that showed nothing
// left) made by the next call would cost the Service the next doubling
// of that backoff: against the real controller, a teardown of three
// levels then needed a 7th call, some 5 minutes after the first. By
// default a call therefore waits for that confirmation itself, and only
// for it: it holds the worker for one pass, as every call does, and then
// for what is left of the declared lag, bounded by the lag and a poll
// and by one CallTimeout from its start; never for the provider's own
// deletions, which take calls. The teardown of what else carries the
// Service's tag is made at the first call, so that its own wait (a
// listing the lag after its making, for a predecessor's late creation)
// has passed by the time it runs. A confirmation that does not fit
// returns a RetryError whose delay is the time left to it (which the
// controller honours on the path without finalizer). A host with one
// worker, many deletions and a long lag chooses a negative TeardownWait,
// and the extra call. Answering
// GetLoadBalancer "does not exist", or EnsureLoadBalancerDeleted nil,
// while the journal holds only destructions the provider accepted was
// rejected: an accepted Destroy is not a completed one (a provider may
// delete asynchronously and fail, and lbrecon destroys again an object
// still listed after ConfirmTimeout), and once the finalizer is gone no
// call comes back for an object a confirming listing would have shown
// still there: it leaks.
//
// # Testing a CCM with the real service controller
//
// Package [github.com/reconkit/reconkit/lbrecon/ccm/ccmtest] runs
// k8s.io/cloud-provider v0.37.1's service controller against a Balancer
// in a user's tests, from a *rest.Config, race-free; its documentation
// says why the controller runs in a process of its own:
//
//   - It has a data race of its own: it writes its cached Service
//     (controllers/service/controller.go:339) outside the lock its node
//     sync reads it under (:503). Under -race, a report fails the test
//     whatever the Balancer does.
//   - It hangs inside a testing/synctest bubble: every error that is not a
//     RetryError reaches apimachinery's runtime.HandleError, whose default
//     rate limiter (runtime.ErrorHandlers) sleeps its 1 ms minimum period
//     minus the time since its last error, and that "last error" is the
//     real time when the package was initialised. The bubble's clock
//     starts in 2000, so the first error sleeps some 26 fake years. Test a
//     Balancer inside a bubble by calling its methods as the controller
//     does; run it under the real controller with ccmtest, on real time.
//
// Each RetryError EnsureLoadBalancer returns costs the controller a
// Warning event (SyncLoadBalancerFailed), a Normal one
// (EnsuringLoadBalancer) and the requests that send them: a
// Reconciler.PollInterval shorter than the provider's list lag retries
// before any listing can show a pass's creations
// (TestProvisioningCostThroughTheController).
//
// # Limits
//
//   - The plan has no protocol and forwards to node ports: see
//     [ServicePorts].
//   - Two Balancers (two processes) must not manage one Service at once;
//     the fence keeps a deposed term from writing, if Admit holds the
//     newest token where both can see it (in memory it holds only this
//     process's).
//   - After a move, the old load balancer is torn down on the Service's
//     later calls (node changes, Service changes, resyncs, deletion): the
//     service controller makes none for a converged Service otherwise.
//   - The assigned address is published by EnsureLoadBalancer, which the
//     service controller calls when the Service changes, not when the
//     provider does: an address the provider moves, or a load balancer
//     recreated by UpdateLoadBalancer after someone deleted it, shows in
//     the Service's status at the next EnsureLoadBalancer.
//   - [ConfigMapJournal] needs get, list, create, update and delete on
//     configmaps in the Services' namespaces. Its shards are owned by the
//     Service (no blockOwnerDeletion); the garbage collector removes any
//     left once the Service is gone.
//
// # Dependencies
//
// This package imports k8s.io/cloud-provider's root and api packages. The
// root package imports client-go's informers, every API group's. Its tests
// run the real service controller with ccmtest, in a process of its own
// (the controller has a data race of its own), its load balancer calls
// forwarded over HTTP (internal/lbwire) to a Balancer in the test process,
// which runs under the race detector. lbrecon
// and lbrecontest compile no k8s.io package beyond k8s.io/utils; a test
// keeps it so.
package ccm
