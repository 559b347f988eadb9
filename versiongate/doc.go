// Package versiongate runs a leader-only reconcile safely in a cluster
// whose nodes run different releases, and holds each node's start-up until
// the reconciled state is compatible with its release.
//
// Every node runs a Gate. The gate watches the node records in its Store
// (on etcd: etcdstore.New, in package versiongate/etcdstore;
// versiongatetest.Store in memory for tests) and keeps a summary of the
// releases they run. This package compiles no store client: a host
// compiles etcd's client and gRPC only if it imports etcdstore. Only a node with
// the newest release campaigns (on the host's election, through
// Candidate); the leader compares the stored Status with the status its own
// release would write and acts (see Decide): it creates the status after
// the first reconcile, leaves an equal one, marks a compatible one WORKING,
// or, when the status admits releases its own state would break, waits
// until no such node is left, writes the intersection of both statuses,
// reconciles and writes DONE. WaitReady returns once the status admits the
// local release.
//
// Membership is either owned by the gate (Config.Decode nil: Run publishes
// a versionpb.NodeRelease record bound to a lease, so a dead node's record
// disappears) or by the host (Config.Decode reads the host's own records,
// for example nodes in a registry filtered by role). A record that does not
// decode is logged and counted as a node of unknown release, which blocks
// every restriction until it decodes or goes (TestUndecodableRecordBlocksRestrict).
//
// # Safety assumptions and guarantees
//
//   - A node's record exists before the node calls WaitReady, and stays
//     while it serves. With gate-owned records WaitReady waits for Run to
//     publish it, and Run fails with ErrRecordLost before the lease can
//     expire on the server (see below): the host must then stop serving,
//     since the leader may no longer count the node. Host-owned records
//     must give the same guarantee.
//   - Under that assumption no node passes WaitReady on a status whose
//     minimum compatible release is above its own, and a leader never
//     raises the minimum compatible release while a member node below it
//     exists: the restricted status is written in one transaction fenced by
//     the term and conditioned on no node record having changed since the
//     summary that showed no such node (Store.WriteStatus).
//   - Every status write is fenced by the term at the moment the store
//     applies it, never by a check made before: on etcd, a term with an
//     etcd guard (etcdstore.Guard, as reconkit's etcd election's terms
//     have) puts its guard in the write's transaction; any other term (a Kubernetes
//     Lease term, an in-memory election's) is fenced by its token: at the
//     start of each term the gate raises the stored fence to the term's
//     token (Store.Fence), and a write succeeds only while the stored token
//     is at most the writer's, compared in the same transaction. All nodes
//     of one gate must use one election, whose tokens never go back (if
//     they do, say a Lease object was deleted and its transitions restart,
//     no term can lead until an operator deletes the fence,
//     etcdstore.Config.FenceKey). The reconcile function is not fenced by
//     the gate: it receives the term and a context that ends with the
//     term, and must pass the term's token on where its target can check
//     it.
//     Targets that cannot (the Kubernetes API) are protected only on a
//     best-effort basis by SettleTime, the wait before a new leader's first
//     reconcile; the periodic reconcile repairs what a deposed leader's late
//     request undid.
//   - The gate stalls rather than act on what it does not know: an absent
//     or corrupt status blocks WaitReady and is overwritten only after a
//     successful reconcile (on the Kubernetes store, a value annotation
//     that is not base64 too: TestNonBase64StatusIsCorruptAndRepaired);
//     an unknown newer release stops this node from
//     campaigning. It is not Byzantine-tolerant: a node that lies about its
//     release defeats it.
//   - A missing or corrupt status is no licence to reconcile: it may have
//     been deleted or damaged under nodes that passed WaitReady on it and
//     still serve. A leader that finds one reconciles only once no member
//     node is below its minimum compatible release, and writes the new
//     status conditioned on no node record having changed since the
//     summary that showed none, as it writes a restricted status. When
//     other nodes have records it says so with a StatusMissing warning
//     (event and error log), so that a deleted status does not pass for a
//     first boot, unless the store proves no status was deleted
//     (StoredStatus.FirstBoot: the Kubernetes store, whose finalizer keeps
//     a deleted status visible), when it logs the first boot at info
//     level (TestFirstBootAmongRecordsIsInfo).
//   - The etcd store reads and writes with linearizable requests; no clock
//     comparisons between nodes are made. SettleTime and the reconcile
//     period run on Config.Clock.
//
// # The two stores side by side
//
// Each guarantee below names how each store keeps it and the test that
// fails when it is broken; each limit names the window of unsafety, or of
// lost liveness, and the test that bounds it. Tests are in etcdstore
// (etcd), kubestore (Kubernetes) and this package (both, on the in-memory
// store).
//
// Guarantees:
//
//   - A joiner never serves on a status that excludes its release.
//     etcd: the restricted status is written in one transaction that
//     compares the records' modification revisions with the summary's
//     (TestRestrictAbortedByConcurrentNodeChange, TestProofJoinersRace).
//     Kubernetes: the write is applied, then validated by a LIST with
//     resourceVersion unset, and reverted on a change
//     (TestJoinerRacesRestrictInterleavings,
//     TestJoinersRaceRestrictAPIServer, TestProofJoinersRace); no decision
//     reads a cache (TestJoinerRaceStaleCacheNotUsed,
//     TestStatusReadNotFromCache). On both, the same race with joiners
//     reading a stale cache must fail (TestProofJoinersRaceStaleCacheFails).
//   - A deposed leader's status write is refused when the store applies
//     it. etcd: the term's guard, or the fence key, is compared in the
//     write's transaction (TestEtcdStoreGuardTerms,
//     TestEtcdStoreFencesTokenTermsThroughTheGate,
//     TestEndedGuardedTermInTheStoresKeyspaceIsRefused). Kubernetes: the
//     update of the status Lease carries the resourceVersion at which its
//     term annotation was read, so a Fence in between gets it a 409
//     (TestDeposedWriteRefusedByServer, TestTwoLeadersRaceTheFence). Both:
//     TestDeposedLeaderWriteRefusedAtApplyTime.
//   - A missing or corrupt status is no licence to reconcile: the leader
//     waits until no incompatible record is alive and writes conditioned
//     on the records (TestMissingStatusWaitsForIncompatibleRecords,
//     TestMissingStatusWriteConditionedOnRecords). etcd cannot tell a
//     deleted status from a first boot, and warns
//     (TestLeaderStatusDeletedWhileOldNodeServes,
//     TestStatusAfterMissingOneConditionedOnRecords). Kubernetes keeps a
//     deleted status visible with a finalizer: it is unreadable
//     (ErrStatusDeleted), never absent, until a Fence finishes the
//     deletion and creates the status Lease again, marked as deleted and
//     with the fence carried on, so the leader treats it as missing, with
//     a warning (TestStatusDeletedIsUnreadableUntilTheNextFence,
//     TestGateRecreatesDeletedStatus).
//   - A status deleted, damaged or changed while a leader keeps its term
//     does not wait for the next term: the leader reads the status back
//     before each periodic reconcile (one read per ReconcileInterval), and
//     a status that is not the one it wrote, or ErrStatusDeleted from any
//     of its status reads and writes, makes it start over within its
//     term: Fence again with the same token (on Kubernetes, this finishes
//     the deletion), read, and the rule above for a missing or older
//     status. So nodes that start after the change wait at most about a
//     reconcile interval plus the leader's wait for old nodes
//     (TestLeaderRecoversStatusChangedMidTerm on the in-memory store;
//     kubestore's TestLeaderRecoversStatusDeletedMidTerm and its
//     APIServer twin). Passes that keep finding the status gone are paced
//     by a backoff with jitter, up to 10s apart
//     (TestStatusGoneEveryPassIsPaced).
//   - A dead record goes only as the record judged dead. etcd: the
//     server's lease expiry deletes it. Kubernetes: the reaper (the one
//     gate holding the reaper Lease) deletes its heartbeat, then it, each
//     conditioned on the resourceVersion and UID it judged
//     (TestReapConditionedOnJudgedVersion), and a listing stays one
//     snapshot (TestListAfterReapIsOneSnapshot).
//   - A node cut off stops serving before its record can be judged dead
//     (etcd: TestCutOffNodeStopsServingBeforeLeaderReconciles; Kubernetes:
//     TestCutOffNodeStopsBeforeObserverDeletes; both:
//     TestRecordLostBeforeStoreExpiresIt).
//   - A node waiting for its status costs the server a read and a watch,
//     not a loop. Whatever the store answers persistently (a status being
//     deleted, 403, a name clash, 410, 429, 5xx), WaitReady retries from
//     100ms doubling to 10s, each pause drawn from half to one and a half
//     times that, so after 30s a node sends at most a read and a watch
//     per 5s (TestStatusWatchEndingAtOnceBacksOff;
//     TestReadinessRetriesBackOff, per answer on the Kubernetes store).
//     Kubernetes: ReadStatus returns the revision of a LIST, which the
//     server can serve a watch from however long the status Lease has
//     been unchanged, so a 410 after a restart costs one fresh read and
//     one more watch (TestStatusWatchFromListingAfterHistoryMovedOn).
//   - End to end: a rolling upgrade of 5 gates with crashes, restarts,
//     partitions and server restarts serves no node below the minimum and
//     completes, and every store operation is linearizable against a model
//     of the store (TestProofRollingUpgrade, on each store).
//
// Limits:
//
//   - The reconcile's own writes are not fenced by the gate: a deposed
//     leader's requests still in flight can land after its successor's
//     first reconcile. SettleTime makes that unlikely, not impossible, on
//     both stores; only a target that checks the term's token closes the
//     window (TestNewerReleaseDoesNotReleaseWhileReconcileRuns bounds the
//     part the gate controls: a term is resigned only after its reconcile
//     returned).
//   - Clocks and pauses. etcd expires a record on the server's clock; a
//     node stops at its own deadline, TTL less the margin after the start
//     of its last acknowledged keep-alive, so its clock must not run slower
//     than the server's by more than the margin over a TTL, and no pause
//     may exceed the margin. Kubernetes: the reaper's clock counts, judged
//     from when it first saw the heartbeat's resourceVersion (TTL plus
//     margin), so the window is twice the margin less the reaper's
//     detection delay. TestCutOffNodeStopsServingBeforeLeaderReconciles
//     and TestCutOffNodeStopsBeforeObserverDeletes measure the slack at
//     default settings; a longer pause can make a node serve after its
//     record is deleted, as with any lease. Ready judges the record's
//     deadline itself when asked, so a node whose gate runs late (starved,
//     not paused) reports not ready from the deadline on
//     (TestReadyFalseAtTheDeadlineWhenTheKeepAliveLoopRunsLate); the
//     readiness condition and WaitReady's error follow when the gate's
//     goroutines run.
//   - Kubernetes only: a restricted status that fails validation is seen
//     until it is reverted; a joiner that reads it only waits (safe). One
//     whose revert failed stays, marked, until the next term's Fence puts
//     back the value it replaced (TestUnvalidatedWriteUndoneByNextFence):
//     liveness, not safety. A first status that was reverted so leaves the
//     status absent, which the next leader treats as missing (above).
//   - Kubernetes only: expiry needs the reaper, a running gate; with none,
//     a dead record stays, and after the reaper crashes its successor
//     first waits out the reaper Lease (up to 33s; liveness only; a
//     reaper that stops releases it).
//   - A server restart leaves the requests it cut off of unknown
//     outcome, open to the linearizability check: open publishes are
//     counted pending rather than placed, which keeps such histories
//     decidable. A check that runs out of time all the same is searched
//     again for longer, and fails the test if still undecided (a check
//     that could not look proves nothing).
//   - Neither store is Byzantine-tolerant: a node can publish any
//     release.
//
// # Leadership
//
// versiongate depends on no election package. Term is the term interface
// every reconkit package shares, so an election.Elector of any backend
// (etcd, Kubernetes Lease, the in-memory electiontest one) is a Candidate
// as it is, and the leader work has election.Run's callback type:
//
//	Candidate: elector,
//	Reconcile: func(ctx context.Context, l election.Leadership) error { ... l.Token() ... },
//
// The gate calls Reconcile at every takeover and then every
// ReconcileInterval while the term lasts: that is the periodic loop inside
// a term, and a host writes no loop of its own.
//
// The Campaign context bounds the wait only. The gate resigns a term
// strictly after its leader work, the reconcile included, has returned, on
// every path: a newer release joining, Run ending, a failed term. Leading
// and LeadingChanged report the gate's leadership without a request;
// Phase and PhaseChanged its progress.
//
// # Lifecycle and observability
//
// Run blocks until every goroutine it started has exited and returns nil
// when its context ends; it returns an error only for a real failure
// (ErrRecordLost, unless Config.RejoinAfterRecordLoss is set; a missing
// Candidate or Reconcile). Config.Metrics receives an Observation at every
// phase change, change of the number of blocking nodes, restricted and
// done status write, acknowledged keep-alive and record loss;
// Config.Events receives the Restricting, Restricted and UpgradeDone
// events and the RecordLost, FencedOff and StatusMissing warnings. Both
// are called from the gate's goroutines and must not block.
//
// Config.Conditions receives the node's readiness as a condition (type
// ConditionReleaseReady by default): True exactly when WaitReady would
// return now (the record valid and the status admitting the local
// release), False with the reason otherwise (record not yet published or
// lost, no status, a corrupt status, a status that does not admit the
// release), reported at every change and once more, False, before Run
// returns. It is called from a goroutine of Run's own, so a slow reporter
// never holds up the gate (see ConditionReporter).
//
// # A node that is cut off
//
// With gate-owned records, Run keeps a local validity deadline for the
// node's record on RecordClock (the real monotonic clock by default): the
// start of the last keep-alive the server acknowledged, plus the TTL, less a
// margin of a tenth of the lease's duration as the store granted it
// (RecordLease.Granted, else its TTL; at least 500ms), the duration the
// store's own expiry adds its margin to (TestMarginFromTheGrantedLease).
// When it passes, the node
// stops serving at once (Ready reports false, WaitReady returns
// ErrRecordLost, Run returns ErrRecordLost), before the server can expire
// the record and so before any leader can see the node gone. A leader that
// then restricts the status still waits SettleTime before it reconciles,
// for requests of the earlier reconciler still in flight. The record is
// created only if absent: a second process with the same NodeID waits,
// logging, until the first one's record is gone.
//
// With Config.RejoinAfterRecordLoss the node stops serving on a loss in
// exactly the same way (its term resigned after the reconcile returned,
// Ready false, WaitReady failing, the condition False, the RecordLost event
// and observation), but Run does not return: it waits, with backoff, and
// publishes a new record, which succeeds once the lost one is gone from
// the store, and the node serves again after a new WaitReady. Without it
// Run returns ErrRecordLost and the host decides.
package versiongate
