// Package lbrecon reconciles a provider's external resources in ordered steps,
// and provides the load-balancer plan (the load balancer itself, backends,
// frontends or listeners, binds, servers, health checks) built on it.
//
// A [Reconciler] talks to the provider through an [Engine] (list by ownership
// tag, get, create with tags, destroy, tag; optionally [Repairer] and
// [Updater]). Each [Step] manages one kind of object and computes what to
// create, update and destroy from the observed objects; [Reconciler.Check]
// returns that [Plan] without changing anything; [Reconciler.Reconcile]
// applies plans and waits until a listing confirms the desired state; and
// [Reconciler.ReconcileOnce] makes one pass and returns "converged" or "call
// again after D" for hosts with their own requeue loop;
// [Reconciler.Teardown] and [Reconciler.TeardownOnce] destroy every owned
// object the same two ways; [TeardownExcept] and [Leftovers] tear down the
// load balancers an owner no longer wants. [NewLoadBalancer]
// wires the steps of a [LoadBalancer] description: with
// [LoadBalancer.Provision], first the provider's load-balancer object
// ([KindLoadBalancer]), whose ID its children carry and whose address and
// DNS name, assigned by the provider ([LoadBalancerStatus] in
// [Object.Status]), [LoadBalancerReconciler.Assigned] reports; per port a
// backend and either a frontend with a bind per external address
// ([ListenBinds], the HAProxy shape) or a listener on the load balancer's
// address ([ListenPorts], the ELB and Octavia shape); per backend a server
// per target and, with [LoadBalancer.HealthCheck], a health check;
// [LoadBalancerReconciler.Status] maps external addresses to the ports
// bound on them. [Moving] is a load-balancer reconciler whose load
// balancer may change its ID: it builds the new one, then tears the old
// ones down.
//
// # Names
//
// Each idea has one name, used in the code, its comments and below; the
// file that holds it follows in parentheses.
//
//   - Object: one thing at the provider, found by kind and ID ([Key]),
//     named by its step, owned when it carries [Config.Tag] (engine.go).
//   - Engine: the provider's API as the reconciler calls it (engine.go;
//     calls, timeouts and retries in fanout.go).
//   - Step: one kind of object and the function that plans it
//     ([Step], [Changes], [Observation]; step.go).
//   - Plan: what a pass found to do ([Plan]), computed from a view
//     (plan.go).
//   - Pass: one listing, merged with the memory into a view, planned and
//     applied phase by phase (repair, adopt, destroy, create, update;
//     apply.go). Reconcile and Teardown repeat passes and wait between
//     them (reconciler.go, wait.go); ReconcileOnce and TeardownOnce make
//     one and answer when to call again (once.go).
//   - Memory: what a Reconciler keeps between passes (memory.go); a
//     listing is folded into it by merge (merge.go). Its records, one
//     type each: intents, creations, updates, deletions and journal
//     entries.
//   - Intent: a creation whose outcome is not known yet (its call in
//     flight, or its answer lost). It holds its name: the name is not
//     created again (memory.go).
//   - Ack: a change the engine acknowledged; two records, each its own
//     type. A creation: an object created (or an intent whose object a
//     listing showed), counted as there while a listing lags. An update:
//     an object updated, repaired or adopted (tagged), planned from as
//     changed while a listing shows it as it was. Each is unconfirmed
//     until a listing shows it, then seen (memory.go, merge.go).
//   - Deletion: an object the engine was asked to destroy; deleting while
//     listed, then gone (memory.go, merge.go).
//   - Horizon: the first listing that must reflect a call: one started
//     [Config.ListLag] after it returned, or its
//     [Config.ListLagListings]+1-th listing after it (horizon.go).
//   - Confirmation: a listing at a record's horizon that agrees with it;
//     the record is then dropped. A listing before it may go backwards
//     (merge.go).
//   - Pace: when a listing can next show something new about the changes
//     outstanding: the declared lag until changes were seen through,
//     then what they took. It spaces polls and RequeueAfter (pace.go).
//   - Journal: where intents and destructions survive the process
//     ([Journal]); its entries ([Intent]) are recorded before the creation
//     is sent and removed from it ([Journal.Forget]) when no intent or ack
//     of the name is left (journal.go, filejournal.go, journalbound.go).
//     A destruction's entry ([Intent].ID set) is recorded before the
//     Destroy is sent, again as Destroyed once the provider accepted it,
//     and removed when its deletion is confirmed (destroyjournal.go).
//   - Fence: the check before every write that the writer's term token is
//     current ([Guard], [CheckToken], [Fence]; guard.go, token.go,
//     fence.go).
//   - Term: a leadership term, known by its fencing token ([WithToken]);
//     a reconciler is in the term of the last token its calls carried
//     (term.go; see Terms below).
//   - Leftovers: load balancers an owner no longer keeps, torn down
//     without a reconciler of their own ([Leftovers], [TeardownExcept];
//     leftovers.go); [Moving] builds a new load balancer, then sweeps
//     the old ones (moving.go).
//   - Load-balancer plan: the steps [NewLoadBalancer] wires from a
//     [LoadBalancer] (the description in lb.go; kinds, specs and their
//     comparison in lbobjects.go; which listed objects are this load
//     balancer's, and their parents, in lbtree.go; the steps and their
//     plans in lbplan.go, the binds a step breaks in binds.go; the
//     reconciler in lbreconciler.go).
//
// # Terms
//
// Keep a Reconciler (and a [Leftovers], a [Moving]) across leadership
// terms: a call whose context carries a fencing token other than the one
// of the term the reconciler is in begins the new term before it reads
// anything. It raises the fence to the token first ([Config.Admit]), so
// that every write of an earlier term, another leader's deposed process
// still calling included, is refused from then on; then it drops what it
// kept from the earlier term (intents, creations, updates, deletions,
// failure counts, and the journal entries it was about to remove, which
// may be another term's by now) and reads the journal
// again, so what it reads next, journal and listings, is read after the
// fence went up. Another leader's term may have created, changed or
// destroyed objects in between: a memory kept from an earlier term would
// create again what that term created and a listing does not show yet,
// or wait for a creation that term destroyed. A [Leftovers] reports
// nothing left only from a listing the lag after the term began. Admit's
// refusal (a later term holds the fence) is the call's error, permanent,
// and nothing is read. A context without a token begins no term.
// (term.go, leftovers.go; term_test.go.)
//
// # Guarantees
//
//   - Ownership: only objects carrying [Config.Tag] are changed or
//     destroyed. An untagged object is adopted (tagged) only when its kind,
//     exact name and spec are those of an object the plan is about to
//     create — for the load-balancer plan the spec names the parent, which
//     is then one of this load balancer's — and is never destroyed. Objects
//     with another value of the tag's key are never touched. (merge.go,
//     plan.go; TestOtherValueOfTheTagKeyNeverTouched,
//     TestUntaggedObjectsNeverDestroyedAndAdoptedOnlyExactly.)
//   - Crash mid-create: before each Create the reconciler records an
//     intent for the name (kind, name, spec fingerprint, idempotency
//     token), in [Config.Journal] first unless it is [NoJournal] — nothing
//     is sent until the journal returned — and in memory; a Create whose
//     outcome is unknown (a transient error, a lost answer) holds the name
//     until a listing shows the object, a listing started
//     [Config.ListLag] after the call does not, nor does the reconciler's
//     [Config.ListLagListings]+1-th listing started after the call, or
//     [Config.ConfirmTimeout] passes, so the name is never created twice.
//     ListLag and ListLagListings are zero by default and then taken from
//     an engine that declares its provider's lag, in time ([ListLagger])
//     or in listings ([ListingLagger]); with none, nor tokens (below),
//     the hold lasts ConfirmTimeout (2 min by default), and a transient
//     create failure costs that much time. A reconciler started
//     after a crash loads the journal and holds its predecessor's names
//     the same way (the lag counted from its start), so a lagging listing
//     does not make it create them again; [FileJournal] keeps the journal
//     in a file, replaced crash-safely (temporary file, fsync, rename,
//     fsync of the directory). An engine that implements
//     [IdempotentCreator] gets the intent's token with the creation, and,
//     once it has shown it takes tokens, a held creation is sent again
//     with its token instead of waiting for the listing: Reconcile
//     retries it within the call like any other, ReconcileOnce on the
//     next call. An object left
//     untagged by a crash is found by its exact name and spec and adopted,
//     never by a pattern. (apply.go, journal.go;
//     TestCrashAtEveryWriteNoDuplicates, TestNoCreateWithoutARecordedIntent,
//     TestCrashBetweenCreateAndTag.)
//   - Eventual consistency, and listings that go backwards: within the
//     declared lag (ListLag, ListLagListings) a listing may miss what an
//     earlier one showed (read replicas). An ack (a created, updated,
//     adopted or repaired object) is unconfirmed until a listing shows it
//     as written, then seen; it is forgotten only when a listing started
//     at its horizon (ListLag after the call returned, or the
//     ListLagListings+1-th listing started after it) shows it, or
//     contradicts it once seen; until then the plan is made from it, so
//     an update a lagging listing shows undone is not made again
//     (TestUpdateShownAsItWasIsNotMadeAgain). A creation of unknown outcome that a
//     listing shows becomes such an ack. A deletion is gone at the first
//     listing that does not show the object, and forgotten at the first
//     listing past the horizon (counted from then) that does not: a
//     lagging listing that shows it again is not believed. So is one
//     that shows again an owned object someone else deleted: missing from
//     a listing started the lag after the first listing that showed it,
//     it is gone (merge.go, horizon.go; TestChildBeforeParentWithinTheLag,
//     TestProvisionDeletedLoadBalancerShownAgainByAReplica). Nor does such
//     an object, shown again, end an intent of its name: it existed before
//     the creation (merge.go; TestDestroyedCopyListedAgainKeepsTheIntent).
//     Nor does its object shown untagged (a crash between create and
//     tag): the intent holds the name until the object is adopted (the
//     adoption's ack holds it then) or a listing at the horizon shows it,
//     so a failed Tag followed by a listing that misses the object does
//     not create it twice (merge.go;
//     TestUntaggedCreationListedOnceKeepsTheIntent,
//     TestUntaggedCreationsOnReplicasNoDuplicates). The journal
//     keeps an entry while an intent or ack of its name is kept. The plan
//     is made from the listing merged with this memory, so a lagging
//     listing neither causes a second creation nor a second destruction,
//     and Reconcile returns nil (ReconcileOnce reports Converged) only
//     once a listing confirms the desired state. An unconfirmed ack is
//     given up after ConfirmTimeout. Deletion that completes
//     asynchronously is waited for on the clock, not re-issued.
//     (merge.go, horizon.go; TestReplicaListingsNoDuplicates,
//     TestListLagNoDuplicatesAndConfirmedSuccess,
//     TestAsynchronousDeletionWaitedForNotReissued.)
//   - Orphans: a child listed without its parent is, within the declared
//     lag, a wait (list again); if the first listing at the horizon set
//     then still lacks the parent, the children listed then are orphans
//     (their parent is gone). An owned orphan is destroyed, children first,
//     through the normal delete path (or, a frontend's or listener's
//     default backend, updated onto the new parent) and the pass goes on;
//     one not ours is never touched and never fails the pass. Without a
//     declared lag such a listing stays [ErrInconsistent]. (horizon.go,
//     lbtree.go; TestOwnedOrphanIsDestroyed, TestOrphanWithinTheLagIsKept,
//     TestForeignOrphanIsLeft.)
//   - Duplicates: two owned objects with one name and one spec are, within
//     the declared lag, a wait (list again); if a listing at the horizon
//     set then still shows every one of them, they all exist: one is kept
//     (the one listed children refer to, else the lowest ID) and the
//     others are destroyed through the normal delete path, and the pass
//     goes on. Without a declared lag such a listing stays
//     [ErrInconsistent]. (plan.go, horizon.go;
//     TestDuplicatePastTheLagIsDestroyed, TestDuplicateWithinTheLagIsKept,
//     TestDuplicateKeptIsTheOneWithChildren, TestDuplicateKeptIsTheLowestID.)
//   - Make-before-break: a replaced object (changed immutable fields, or
//     mutable ones on an engine without [Updater]) and an object nobody
//     wants any more are destroyed only once the step has no creation left
//     to bring into service, so a backend never holds fewer servers than
//     min(old, new) during a change. Exceptions: failed objects, objects
//     whose name the engine refused to reuse ([ErrAlreadyExists]), and
//     children of a parent that goes away for good (removed, or failed and
//     recreated) — only that parent's children when the step has
//     [Step.Refs], every object of the dependent kind without it — and
//     objects a step breaks ([Changes.Break]): in the load-balancer plan, a
//     bind holding the address and port another bind needs when it is
//     destroyed anyway, and one bind per cycle of binds taking each other's
//     (ports swapping external ports), so that such changes converge on a
//     provider that refuses two binds on one address and port. (plan.go,
//     binds.go; TestTargetReplacedMakeBeforeBreak,
//     TestMakeBeforeBreakLostOnlyUnderTheRecreatedParent,
//     TestListenersMovedBetweenBinds.)
//   - References: a step's objects are created only once their parents
//     ([Step.Refs]) are ok; a parent is destroyed only after a listing
//     shows its children gone; the children of a failed parent are
//     destroyed before it is recreated, and planned against the new one.
//     With Provision, the load-balancer object is the parent of backends,
//     frontends and listeners: they wait for it to be ok, and of two
//     alike past the lag the one they refer to is kept.
//     (plan.go, step.go, lbtree.go;
//     TestFailedParentRecreatedWithReferencesRespected,
//     TestProvisionChildrenWaitForThePendingLoadBalancer,
//     TestProvisionDuplicateKeptIsTheOneWithChildren.)
//   - Teardown: [Reconciler.Teardown] (blocking) and
//     [Reconciler.TeardownOnce] (one pass, "call again after D") destroy
//     every owned object of the steps' kinds in reverse order, under the
//     rules above (references, asynchronous deletion waited for and never
//     re-issued, success only once a listing shows nothing left and, with
//     a journal, once a listing at their horizon confirmed its
//     destructions, so that no journal entry is left behind), failed
//     and pending objects included, never an untagged one. While only
//     that confirmation is left, TeardownOnce says so
//     ([Result].Confirming, RequeueAfter the time to the horizon, within
//     ListLag and (ListLagListings+1) PollIntervals), so that a host
//     whose own retries back off (cloud-provider's) may wait for it
//     rather than call again; a journal that fails to forget the
//     confirmed entries is a failure a wait may cure (Result.Transient,
//     a growing RequeueAfter), never a poll every PollInterval
//     (TestTeardownOnceSaysWhenOnlyConfirmationIsLeft,
//     TestTeardownOnceBacksOffAJournalThatFailsToForget). A
//     [LoadBalancerReconciler] tears down only its own load balancer, for a
//     load balancer removed or whose ID changed. [TeardownExcept] (blocking)
//     and [Leftovers.TeardownOnce] need no reconciler of the old ID: they
//     tear down, under the same rules, every load balancer whose backends or
//     frontends carry the tag and whose ID is not kept, found anew in each
//     listing (binds and servers by their parent); a kept load balancer's
//     objects are never touched, and their states neither hold the
//     teardown back nor fail it. They report success only from a listing
//     made the list lag after the Leftovers was made, so that a crashed
//     predecessor's late creation on an old ID is torn down too; once
//     converged, a listing within the lag that shows the destroyed
//     objects again is not believed (deletions, above).
//     (reconciler.go, once.go, leftovers.go;
//     TestLeftoversDestroyedCopiesListedAgain,
//     TestReconcilerTeardownDestroysEveryOwnedObject,
//     TestTeardownDestroysFailedAndPendingObjects,
//     TestTeardownExceptRemovesOtherLoadBalancers,
//     TestLeftoversWaitForLateCreations.)
//   - Crash mid-teardown: destructions are journaled as creations are
//     ([Intent].ID): recorded before the Destroy is sent (nothing is
//     sent until the journal returned), recorded again as Destroyed once
//     the provider accepted it (or answered not found), and kept until a
//     listing at the deletion's horizon (ListLag after the object was
//     first seen gone) no longer shows the object. A reconciler started
//     after a crash, or beginning a new term, loads them as deletions: a
//     lagging listing, or a provider still deleting asynchronously, that
//     shows a destroyed object is neither taken for converged (the
//     object is being deleted; a move does not publish its address)
//     nor sent the destruction again. One whose acceptance the crash
//     kept from the journal (the process died between the call and the
//     record of its answer) is of unknown outcome: it is sent again,
//     once, when a listing shows the object, and planned from as there
//     until then, so that its name is not created twice. A [Leftovers]
//     journals its destructions under the load balancer the object is on,
//     and reads those of the load balancers it does not keep, so that a
//     [Moving] moved back to an ID its sweep tore down builds it anew
//     (the sweep runs once the earlier IDs' reconcilers are dropped, and a
//     new reconciler of the ID reads the journal).
//     Journaling destructions was chosen over having every new process
//     trust no listing until the lag after it started: that would cost
//     every failover one lag before its first convergence, and still
//     believe a provider whose deletion completes after the lag of its
//     Destroy call. (destroyjournal.go, merge.go, leftovers.go;
//     TestCrashMidTeardownJournaledDestructions, TestMovingOnReplicas.)
//   - The load balancer itself: with
//     Provision, the load-balancer object is an object of the plan like
//     every other: its creation is journaled before it is sent, held
//     while its outcome is unknown, adopted when left untagged, fenced,
//     and confirmed by a listing at its horizon, so a crash or a failover
//     during it never makes a second one. Backends, frontends and
//     listeners are created once it is ok, under the ID the provider gave
//     it. What the provider assigns ([Object.Status]) is not desired
//     state: comparisons, fingerprints and adoption ignore it, so it
//     renames and rebuilds nothing, and a listing without it after one
//     with it (a lagging replica) does not take it away. The plan waits
//     for it ([Changes.Wait]: the object is reported Pending, the plan
//     does not converge) and makes binds on the assigned address too; an
//     address the provider changes moves the binds alone. A load balancer
//     deleted by someone else, with its children, is created again and
//     its children under it; a failed one is destroyed once a listing
//     shows its children gone, and created again with its children under
//     the new one. A teardown destroys its children first and
//     the load balancer once a listing shows them gone. (lbplan.go,
//     lbtree.go, lbreconciler.go; TestProvisionConvergesAndStays,
//     TestProvisionCrashAtEveryWrite, TestProvisionVIPArrivesLate,
//     TestProvisionVIPChangedByProvider,
//     TestProvisionBackwardsListingKeepsTheAddress,
//     TestProvisionLoadBalancerDeletedBySomeoneElse,
//     TestProvisionFailedLoadBalancerRecreatedChildrenFirst,
//     TestProvisionTeardownChildrenBeforeTheLoadBalancer.)
//   - Health checks: a [LoadBalancer.HealthCheck]
//     is an object of its own per backend ([KindHealthCheck]), named as its
//     backend: setting it (externalTrafficPolicy Local) or clearing it
//     (Cluster) creates or destroys health checks alone; a new port or
//     path updates them in place. (lbplan.go, lbobjects.go;
//     TestHealthCheckSwitchChangesOnlyHealthChecks.)
//   - Update in place: a step's comparison ([Compare]) tells up-to-date
//     (fields the provider defaults are no difference), updatable (through
//     [Updater], else replaced) and replace. (lbobjects.go, apply.go;
//     TestProviderDefaultsDoNotRecreate, TestNodePortChangeKeepsBackendsServing,
//     TestEditedAddressReplacesTheObject.)
//   - Failures are bounded across calls: a failed object is repaired in
//     place once when the engine implements [Repairer] (an answer of
//     [ErrNotSupported] is no error: it is recreated instead), then
//     recreated, at most [Config.FailureBudget] times per name, counted
//     across Reconcile calls until an object of the name is seen ok or
//     [Reconciler.ResetFailures] is called; past that it is left alone and
//     reported with [ErrResourceFailed]. A pending object is reported with
//     [ErrPendingTimeout] after [Config.PendingTimeout], counted from when
//     it was first seen pending. Neither blocks unrelated work or teardown.
//     (plan.go, apply.go; TestFailureBudgetAcrossCalls,
//     TestFailedResourceRepairedInPlace, TestUnsupportedRepairIsNotAnError,
//     TestPendingTimeoutOnFakeClock,
//     TestStuckObjectDoesNotBlockOtherWorkOrTeardown.)
//   - Errors are classified: not-found answers are final, already-exists
//     and conflict answers mean "look again" on the next pass, permanent
//     errors (backoff.Permanent) are not retried, rate-limit errors with a
//     RetryAfter() hint are retried no sooner than that hint nor than the
//     backoff (a hint of 0 falls back to the backoff), and other errors are
//     retried within [Config.RetryBudget] — except Create, which is not retried after a
//     transient error unless it was sent with an idempotency token (see
//     above). Per-call timeouts are reported as
//     timeouts ([OutcomeTimeout]), not as cancellations. (fanout.go;
//     TestRateLimitHonoured, TestPermanentErrorNotRetried,
//     TestTransientErrorsRetriedOnATimeBudget,
//     TestTransientCreateErrorHoldsTheName, TestTimeoutsReportedAsTimeouts,
//     TestDestroyAnsweredNotFoundIsDone.)
//   - Non-blocking: ReconcileOnce and TeardownOnce never wait on the clock
//     and make each engine call once, within [Config.CallTimeout] (which
//     bounds every attempt of every call, and every call to the
//     [Config.Journal], on the clock); every call of a pass ends by the
//     time the pass has run for CallTimeout, and none starts with less
//     than a tenth of it left (the calls left are the next call's, their
//     names not held), so a pass returns within one CallTimeout however
//     the provider answers, provided the engine and journal honour their
//     context. A creation cut short by the pass's end is of unknown
//     outcome and held like one whose answer was lost (see Crash
//     mid-create). What a wait may cure (a transient
//     error, a timeout, a 429) is reported in [Result].Transient with a
//     RequeueAfter that grows while it lasts and honours a retry-after
//     hint; the host's next call is the retry. A result is converged, or
//     has a positive RequeueAfter, or comes with an error: a deadline that
//     passes during the pass (engine calls take time) is acted on by the
//     next call. Check and Observe make one List attempt, never retried.
//     (once.go, fanout.go; TestReconcileOnceBoundedByTheCallTimeout,
//     TestReconcileOnceSendsNoCallAfterTheCallTimeout,
//     TestReconcileOnceWithinOneCallTimeout, TestCheckAndObserveListOnce.)
//   - Bad input is refused without changes: an invalid configuration or
//     [LoadBalancer] is an [ErrInvalidConfig] error, and an engine answer
//     that contradicts itself (one kind and ID listed twice, two owned
//     objects with one name and spec, an object whose parent is not listed)
//     is an [ErrInconsistent] error, returned before anything is changed.
//     (config.go, lb.go, merge.go, lbtree.go; TestNewRejectsBadConfig,
//     TestProvisionValidation, TestInconsistentAnswersChangeNothing,
//     TestDuplicateIsAnInconsistentAnswer.)
//   - Calls: one List per pass; while waiting, one List per poll, or one Get
//     per object when only a few confirmed objects are pending
//     ([Config.GetPollMax]); one call per created, updated, destroyed,
//     adopted or repaired object. Polls for unconfirmed writes come no
//     earlier than earlier writes took to show; when a listing still lacks
//     a write after that time, the next poll (and ReconcileOnce's
//     RequeueAfter) waits the write's age again, so a provider slower than
//     learnt costs a number of Lists logarithmic in the error. Before any
//     write was seen through, a pass that created asks to be called again
//     no sooner than the declared ListLag after its creations: a listing
//     before then need not show them. Calls inside a phase run in
//     parallel, at most [Config.Parallelism] at once; there is no global
//     lock. (pace.go, once.go, wait.go, fanout.go;
//     TestReconcileOnceWaitsForTheDeclaredLagAfterWriting,
//     TestSlowerDeletionThanLearntCostsOneList, TestBlockingLoopsNeverSpin,
//     TestOnceLoopsNeverSpin.)
//   - Fencing: a host puts its term's fencing token in the context with
//     [WithToken]; the context given to Reconcile, ReconcileOnce, Teardown,
//     TeardownOnce, Check and Observe reaches every engine call, where
//     [TokenFrom] reads it (to send it with a provider's conditional
//     write). [Guard] wraps an engine so that a check runs before every
//     write (Create, Destroy, Tag, Update, Repair) and forwards [Repairer]
//     and [Updater]; [CheckToken] is that check for tokens: it refuses a
//     write without a token ([ErrNoToken]) or one its admit function finds
//     stale, for good (never retried). [Fence] is such an admit function,
//     keeping the highest token in memory. A fence that holds a higher
//     token than the writer's refuses with a [*FenceError] ([ErrFenced])
//     that names the fence, the stored token, the writer's token and how
//     to clear the fence: the writer is deposed, or the token source went
//     back (a restored backup) and an operator must clear the fence. The
//     reconciler stops the pass at the first such refusal, sends no other
//     write, and returns the refusal once per call. (guard.go, token.go,
//     fence.go; TestGuardChecksEveryWriteBeforeIt,
//     TestTokenReachesEveryEngineCall, TestCheckTokenFencesStaleWriters,
//     TestFenceAheadOfTheLeaderReportedOnce.)
//   - Every wait goes through [Config.Clock]; when the context ends,
//     Reconcile and Teardown return promptly with an error wrapping
//     ctx.Err(), after every call they started has returned. No goroutine
//     outlives a call. (wait.go, reconciler.go, fanout.go;
//     TestCancellationEndsPromptly, TestCancellationDuringCreates,
//     TestTeardownCancellationEndsPromptly.)
//   - [Metrics] receives every call attempt's verb, outcome and duration, and
//     every Reconcile's and Teardown's, so a host can export counters and histograms without
//     this package importing a metrics library. (metrics.go;
//     TestMetricsHook.)
//
// # Limits
//
//   - The reconciler is not a lock: two reconcilers with the same tag on the
//     same objects race. Reconcile, ReconcileOnce, Teardown and
//     TeardownOnce calls on one Reconciler are serialised.
//   - The memory of unconfirmed writes lives in the Reconciler: keep one per
//     set of objects. [Config.Journal] is required; a host that sets it to
//     [NoJournal] chooses that a new process starts without that memory:
//     on a provider whose listing lags, it creates again what its
//     predecessor created just before it died.
//   - ConfirmTimeout must exceed the list lag: New refuses a smaller one
//     ([ErrInvalidConfig]) and raises the default to twice a longer lag.
//   - With no lag declared (ListLag and ListLagListings zero), the first
//     listing after a call is trusted to reflect it: a provider whose
//     listings can go backwards must declare its lag, or it may get
//     duplicates.
//   - If a listing lags by more than ConfirmTimeout (or ListLag or
//     ListLagListings, when set or declared by the engine), a creation of
//     unknown outcome may be made twice; the duplicate is then reported as
//     [ErrInconsistent] and left for the operator. Both lags count from
//     when the call returned: a provider that may still carry out a call
//     its client gave up on (cut short by CallTimeout) must declare a lag
//     that covers that too.
//   - ReconcileOnce and TeardownOnce get a write done only if a List and
//     that write fit in one CallTimeout: with a slower provider every
//     write is cut short (its outcome unknown, a creation held) or not
//     started. Set CallTimeout above a List plus one write.
//   - A journal's intents are matched to listed objects by
//     [SpecFingerprint], which is exact for specs without pointers or
//     maps. Two processes must not share one journal. A [Journal]
//     implementation must key entries by scope, kind, name and ID: a
//     destruction's entry shares kind and name with the creation of its
//     replacement. Entries are kept
//     per scope ([Intent].Scope): reconcilers of one owner with different
//     scopes (a [Moving]'s old and new load balancers) may share one
//     journal value, and never replace or remove each other's entries.
//   - A child whose parent is missing from the listing stops the plan
//     ([ErrInconsistent]) until the listing is consistent again. With a
//     declared lag, a read replica may show a new child before its
//     parent: the pass then changes nothing and lists again (Reconcile
//     after PollInterval, ReconcileOnce as a Transient result) until a
//     listing the lag after the first such answer, and only a listing
//     past that still missing the parent is ErrInconsistent. Two owned
//     objects alike (one name, one spec) are waited for the same way: a
//     new process may be shown, next to the load balancer its
//     predecessor made again, the one someone else deleted.
//   - Moving an owner to another load balancer with a new
//     [LoadBalancerReconciler] leaves its objects on the old one (backends
//     and frontends of other load balancers are ignored) until the host
//     calls Teardown on the old load balancer's reconciler, or
//     TeardownExcept with the IDs it keeps; [Moving] does both, after the
//     new load balancer converged; its reconcilers share cfg.Journal.
//     While it tears the old ones down, [Moving.ReconcileOnce] reports
//     the new one converged ([Result].CurrentConverged: its address may
//     be published), and a failure of that teardown, blocking or not,
//     wraps [ErrPreviousNotTornDown] (moving.go;
//     TestMovingReportsTheCurrentConvergedWhileTheOldResists). A
//     [Leftovers] sweep keeps no journal: it does not wait for a late
//     creation on an old ID that no listing shows yet. A previous ID's
//     reconciler, torn down, is kept for the list lag (a replica may show
//     what it destroyed): a move back to that ID takes it back with its
//     memory, and the sweep begins once the lag has passed, so neither
//     believes a replica that shows the destroyed objects again nor
//     destroys them twice (moving.go; TestMovingOnReplicas). A process
//     started after a crash in the middle of a teardown, or moved back to
//     an ID only its sweep tore down, knows those destructions from the
//     journal (see Crash mid-teardown): it publishes the new address only
//     once the load balancer it builds converged, whatever the old one
//     does, and destroys nothing a second time, but a destruction whose
//     acceptance the crash kept from the journal, sent again once. With
//     [NoJournal], such a process may within the lag take a destroyed
//     object a replica shows for there, and destroy it again.
//   - [Leftovers] knows a bind or server's load balancer only through its
//     parent: one whose parent is not listed with the tag is left alone.
//   - Teardown never destroys an untagged object, so an object left
//     untagged by a crash between create and tag stays behind.
//   - With Provision, the provider must delete a load balancer's
//     children with it when someone else deletes it (Octavia's cascade,
//     ELB's listeners): a backend left referring to a load balancer no
//     listing shows is [ErrInconsistent] (after the lag) until an
//     operator removes it. Provision cannot change for a reconciler.
//   - On read replicas, an address the provider changed may show old and
//     new in turn within the lag: binds on it (ListenBinds) follow, made
//     and destroyed until the lag passes; listeners do not depend on it.
package lbrecon
