// Package kubestore is versiongate's Store on the Kubernetes API alone:
// node records and the status are coordination.k8s.io/v1 Leases in one
// namespace, every write carries a resourceVersion precondition, and every
// read a decision rests on is linearizable (GET or LIST with
// resourceVersion unset, never "0", never an informer cache). It compiles
// no etcd client and no gRPC (TestNoEtcdDependencies).
//
// [New] builds a [Store] from a client, a namespace and a gate name. Its
// Leases in that namespace:
//   - each node's record is the Lease <gate>-<nodeID> (labels
//     reconkit.io/gate=<gate>, reconkit.io/role=record), its value in the
//     annotation reconkit.io/value (base64), and in reconkit.io/heartbeat
//     the Lease whose renewals keep it alive, as <namespace>/<name>/<uid>.
//     A record is membership: it is written when published and deleted,
//     never renewed, so a watch of the records sees only nodes joining and
//     leaving;
//   - the node's heartbeat Lease <gate>.<nodeID> (role=heartbeat), which
//     its KeepAlive renews (with Config.NodeLease, the node's own Lease
//     instead; see below);
//   - the reaper Lease <gate>-reaper (role=reaper; see "The reaper");
//   - the status Lease <gate>-status (role=status): its value in
//     reconkit.io/value, the fencing term in reconkit.io/term, and the
//     finalizer reconkit.io/versiongate-status.
//
// Node IDs must make valid object names of both <gate>-<id> and
// <gate>.<id>; "status" and "reaper" are reserved. Gates that share a
// namespace can want one name: gate a's record of node b-status is named
// as gate a-b's status. A Store writes no Lease that is not labelled as
// its own, and the second to want the name gets an error naming the clash
// (a publish's wraps ErrRecordHeld): TestGatesWhoseNamesClashNeverWriteEachOthersLeases.
// Give gates in one namespace names that are not another's followed by
// '-', or namespaces of their own.
//
// Revisions are the Leases' resourceVersions, one counter for records and
// status alike since they are one resource. The client needs get, list,
// watch, create, update and delete on leases.coordination.k8s.io in the
// namespace; an error for a missing permission names the verb, one for a
// server without the API says so, and every error names the verb and the
// object (TestErrorsNameVerbAndObject).
//
// # How it differs from etcd
//
// The apiserver has no lease that deletes a record, and no transaction
// across objects. So:
//
// Expiry is an observer's judgement, made by one observer: the reaper. A
// record is dead once the Lease it names (its heartbeat) has not changed
// its resourceVersion for its leaseDurationSeconds plus the gate's margin
// (max(TTL/10, 500ms)) since the reaper first saw that resourceVersion, on
// the reaper's monotonic clock. The reaper then deletes the heartbeat,
// conditioned on that resourceVersion and UID (a renewal in between
// refuses it, and the record stays), then the record, likewise
// (TestReapConditionedOnJudgedVersion). PublishRecord judges a heartbeat
// in its way the same way. A record whose heartbeat the reaper has not
// seen alive (gone, or another object) for the record's TTL plus the
// margin since it first noticed is an orphan candidate: the reaper reads
// the heartbeat (GET, linearizable), and deletes the record, conditioned
// likewise, only if the object it names is gone for good, so a reaper
// whose view lags never deletes a record kept alive
// (TestOrphanDeletedOnlyOnceItsHeartbeatIsReadGone); a heartbeat no
// record names is deleted once dead (TestOrphansEnd). An orphan whose
// read or delete fails is tried again its TTL and the margin later, not
// at every reap (TestFailedOrphanJobIsJudgedAgainATTLLater), and a record
// the reaper deleted is judged no more until its watch or a listing shows
// it gone (TestReapedRecordIsNotJudgedAgainWhileTheWatchIsBlind).
//
// # The reaper
//
// Every Store running WatchRecords (every gate) takes part in holding the
// reaper Lease: its watch of the records includes that Lease, whose events
// are not records and reach neither the gate nor the validation. A Store
// creates the Lease when absent, with a random identity of its own and a
// duration of 30s, renews it every 10s (an update conditioned on the
// resourceVersion), and takes it over, conditioned likewise, once it has
// not changed for its duration plus the margin since this Store first saw
// it, the judgement records get (TestReaperTakeover). While it holds it,
// and only then, a Store lists and watches the liveness objects and
// reaps. When its WatchRecords returns, it releases the Lease: a delete
// conditioned on the UID and resourceVersion it last saw, so that another
// Store creates it at once (TestReaperReleasedWhenItsWatchEnds). A Store
// that crashes, or cannot reach the apiserver within 2s, releases
// nothing, and the Lease ages out. No observer but the reaper receives a
// heartbeat (TestOnlyTheReaperReceivesKeepAlives).
//
// Two reapers at once (a holder that has not yet seen the takeover, two
// takeovers from stale views) are harmless, so the Lease needs no
// fencing: every delete is conditioned on the object and resourceVersion
// judged, so each record is deleted once and a live one never
// (TestTwoReapersReapOnce). A crashed reaper costs liveness only: dead
// records wait up to the reaper Lease's duration plus its margin (33s)
// longer, and a gate blocked by one waits that much more.
//
// The restrict is write, then validate. WriteStatus(t, v, nodesRev)
// writes v (marked reconkit.io/unvalidated-previous, holding the value it
// replaced) with a resourceVersion precondition, then LISTs the records.
// Each listed record must be one this Store delivered through ListRecords
// or WatchRecords, with the value delivered, set at or before nodesRev.
// If one is not, the write is reverted (conditioned on the resourceVersion
// it wrote) and ErrNodesChanged returned; if all are, the mark is dropped.
// The argument: a joiner writes its record J, then reads the status R
// (both linearizable); the leader writes W, then lists L. If L misses J,
// then L precedes J, so W precedes R and the joiner reads the restricted
// status and waits. If L shows J, the write is reverted. One always sees
// the other; a joiner that briefly sees a write later reverted only waits.
// A write whose validation never finished (the leader died or was cut off
// after W) stays marked; the next term's Fence puts the replaced value
// back in the same update that raises the term, so no leader takes an
// unvalidated restriction for an established one.
//
// # Guarantees
//
//   - A deposed leader's status write is refused by the apiserver: the
//     term is read from the status Lease and the update carries the
//     resourceVersion read, so a Fence in between fails it with 409
//     (TestDeposedWriteRefusedByServer, TestTwoLeadersRaceTheFence).
//   - A joiner never serves on a status that excludes it and stands: see
//     the argument above (TestJoinerRacesRestrictInterleavings,
//     TestJoinersRaceRestrictAPIServer, TestJoinerRaceStaleCacheNotUsed,
//     TestStatusReadNotFromCache, TestUnvalidatedWriteUndoneByNextFence).
//   - A heartbeat is deleted by the reaper only as the object and
//     resourceVersion it judged dead, and its record only after it
//     (TestReapConditionedOnJudgedVersion; on node Leases, which the store
//     never writes, the reaper reads the node Lease first:
//     TestNodeLeaseExpiryConditionedOnJudgedVersion).
//   - A cut-off node stops serving before the reaper can delete its
//     record, at default settings: its gate fences itself at the start of
//     its last acknowledged keep-alive plus TTL − margin; the reaper first
//     saw that keep-alive's resourceVersion after it started, and waits
//     TTL + margin from then: 2 × margin apart at least (2s with the
//     default 10s TTL; TestCutOffNodeStopsBeforeObserverDeletes).
//   - A record deleted by anyone but the reaper (an operator, a script)
//     is no proof that its node stopped: that node serves until its next
//     keep-alive, up to a third of its TTL later, learns of the loss. So a
//     Store that sees a record deleted reads the heartbeat it named (GET),
//     and while it is there reports no deletion and keeps listing the
//     record, reading it again every third of the TTL, until it is gone
//     (the node's KeepAlive, finding its record lost, deletes it before
//     returning ErrRecordLost, conditioned on its own last renewal) or
//     unchanged for the TTL plus the margin (the reaper's rule). A leader
//     therefore counts the node until it has stopped: at most the TTL,
//     the margin and a third of the TTL after the delete (58s with 40s
//     records, a node cut off from the apiserver), typically two
//     keep-alive periods (TestRecordDeletedByHandIsNoProofOfDeath and
//     TestRecordDeletedByHandIsNoProofOfDeathAPIServer, with 40s
//     records). The reaper and DeleteRecord delete the
//     heartbeat first, so their deletions are reported at once. With
//     Config.NodeLease this does not hold: see its limits. A held
//     deletion, once proven, is reported at the position of the watch
//     that reports it, after every change the watch delivered before it
//     (TestHeldDeathReportedAtTheWatchPosition).
//   - What WatchRecords reports is its own: a ListRecords beside it on
//     the same Store (its methods are safe for concurrent use), even one
//     that has seen changes the watch has yet to deliver, takes no change
//     from its callback; at worst the watch repeats a record unchanged, for
//     an edit of other fields of a record that listing saw changed later
//     (TestWatchReportsChangesAListingBesideItSaw). A status conditioned
//     on a revision where the watch showed a value that such a listing
//     saw changed back is refused (TestValidationSeesAChangeBackAListingHid),
//     and a listing answered before a held deletion does not end the hold
//     (TestHeldDeathSurvivesAnOlderListing). A held deletion, once proven,
//     is reported by one WatchRecords: run one per Store, as a gate does.
//   - A node whose record was deleted or replaced (seen by its store's
//     listing or watch), or whose heartbeat is gone, gets ErrRecordLost
//     from its next KeepAlive (TestRecordDeletedAloneIsLost,
//     TestReapConditionedOnJudgedVersion), also when the store saw it
//     while the record's create was in flight, before its answer came
//     back (TestRecordChangedBeforeTheCreateAnswersIsNotMissed, and on
//     the real apiserver ...APIServer; an edit seen then is repaired).
//   - A deleted status is never a first boot, and an operator's delete
//     does not wedge the gate. The finalizer keeps a deleted status Lease,
//     terminating; reads and writes of the status then fail with
//     ErrStatusDeleted, naming the Lease and what happens next, so a
//     waiting node keeps waiting, with the readiness wait's backoff. A
//     Fence with a token at least the deleted Lease's term finishes the
//     deletion, removing the finalizer conditioned on the resourceVersion
//     read, and creates the Lease again: every leader's first step, and
//     the step a leader in its term takes again when it finds the status
//     terminating (ErrStatusDeleted, which is versiongate.ErrStatusDeleted,
//     from its status reads and writes, or its read-back before each
//     periodic reconcile), so that nodes starting meanwhile wait about a
//     reconcile interval, not until the next term
//     (TestLeaderRecoversStatusDeletedMidTerm, and its APIServer twin).
//     The new Lease's term is the Fence's token, at least the deleted
//     Lease's (a lower token is fenced off by the deleted Lease, and
//     recreates nothing), so the fence never goes back; and it carries AnnotationStatusDeleted, so it reads as a
//     missing status, not a first boot. The leader then warns
//     (StatusMissing), reconciles only once no node below its minimum
//     compatible release has a record, and writes conditioned on the
//     records, the rule for any missing status
//     (TestStatusDeletedIsUnreadableUntilTheNextFence,
//     TestGateRecreatesDeletedStatus, which also counts the gate's
//     requests meanwhile, and TestGateRecreatesDeletedStatusAPIServer).
//     A status Lease without a value and without that annotation proves a
//     first boot (StoredStatus.FirstBoot), which the leader logs at info
//     level (TestFirstBootAmongRecordsIsInfo). An operator who removes
//     the finalizer of a deleted status by hand makes the next one a
//     first boot. A deleted status Lease that another controller's
//     finalizer also holds stays until that finalizer goes; Fence's error
//     names it, and the leader retries with its backoff, keeping its
//     term, as it does while creations are refused (a namespace being
//     deleted) and under 409s: a Fence reads at most three times
//     (TestLeaderRecoveryRefusedKeepsItsBudget). A deletion seen by one
//     Fence marks the Lease whichever later Fence of the store creates.
//   - Uninstalling: the finalizer also holds the namespace's deletion, so
//     a gate that goes away with all its nodes calls Store.Uninstall,
//     which removes the finalizer and the status Lease; the namespace's
//     deletion then completes (TestUninstallRemovesTheStatus,
//     TestUninstallLetsTheNamespaceGo). A leader still running in a
//     namespace being deleted finishes the status Lease's deletion too,
//     within about a reconcile interval, so the namespace's deletion
//     completes without Uninstall; the server refuses to create the Lease
//     again there (403), and the leader retries with backoff until the
//     namespace exists again, then creates it marked as deleted
//     (TestLeaderRecoveryRefusedKeepsItsBudget,
//     TestLeaderRecoversStatusDeletedMidTermAPIServer). With no leader
//     running, nothing else removes it: a gate cannot tell its last node
//     stopping from a restart.
//   - A status value annotation that is not base64 (an operator's typo)
//     is a corrupt status, not a failed read: StoredStatus.Corrupt wraps
//     versiongate.ErrCorruptStatus, the gate blocks on it and its leader
//     overwrites it after a successful reconcile
//     (TestNonBase64StatusIsCorruptAndRepaired, FuzzStatusAnnotation).
//   - A record whose value annotation is not base64, missing or empty is
//     a corrupt record, never a deleted one (which would make its node,
//     perhaps still serving, count as gone): versiongate.Record.Corrupt
//     wraps versiongate.ErrCorruptRecord, the gate counts it as a node of
//     unknown release that blocks every restriction, and the record's
//     owner, once its store has seen the edit in a listing or watch,
//     writes its value back at its next keep-alive, conditioned on the
//     resourceVersion it saw (TestNonBase64RecordBlocksUntilRepaired,
//     TestNonBase64RecordBlocksUntilRepairedAPIServer,
//     FuzzRecordAnnotation). Any other edit of a record's value is
//     repaired the same way.
//   - A watch the server ends is reopened from the last revision seen,
//     after a pause that grows while watches deliver nothing; 410 Gone
//     returns ErrWatchExpired and the caller lists again
//     (TestWatchEndingAtOnceDoesNotSpin). ReadStatus's revision is its
//     LIST's, not the status Lease's own resourceVersion, so the status
//     watch starts where the server can serve it, however old the status
//     (TestStatusWatchFromListingAfterHistoryMovedOn). The reaper's loop and its
//     liveness watch pause likewise after a refusal or a failure
//     (TestReaperDoesNotSpin), and a heartbeat whose conditioned delete
//     was refused (renewed meanwhile, though a watch that keeps ending has
//     not shown it) is judged again from then, a TTL and the margin later.
//     Every loop of a leading node sends at most one request a second
//     after 30s of any persistent answer
//     (TestEveryLoopOfALeadingNodeKeepsItsBudget; BUDGETS.md).
//
// # Limits
//
//   - Clocks and pauses: the cut-off guarantee assumes the node's and the
//     reaper's clocks run at rates that differ by less than the margin
//     over a TTL, and that no process pause (GC, SIGSTOP, a frozen VM)
//     exceeds 2 × margin minus the reaper's detection delay; a node
//     paused longer can serve after its record is deleted, as with any
//     lease. etcd's server-side expiry is independent of the client's
//     clock; here the reaper's clock counts.
//   - A dead node's record stays until a Store running WatchRecords holds
//     the reaper Lease and has watched its heartbeat for TTL + margin:
//     with no gate running nothing is deleted, and after the reaper's
//     death its successor waits out the reaper Lease first (liveness
//     only).
//   - A publish cut off between its heartbeat's creation and its
//     record's (the process crashed, or lost the apiserver, with the
//     heartbeat created) leaves that heartbeat claiming the node's ID,
//     with no record. Every later publish of the ID, the restarted
//     node's own included, is refused with ErrRecordHeld until the
//     heartbeat has been unchanged for its TTL plus the margin since the
//     publishing Store first saw it: the node cannot pass WaitReady for
//     up to TTL + margin after its first retry (11s with the default 10s
//     records, 44s with 40s records), and the gate's publish backoff may
//     add a retry's wait to that. The claim is not cleared sooner because
//     a restarted process cannot tell its own earlier claim from that of
//     a live process publishing the same ID
//     (TestProofHeldByACrashedPublishHeartbeat; liveness only).
//   - A Store's validation knows only what that Store delivered: the
//     gate's WriteStatus must go through the Store whose ListRecords and
//     WatchRecords built its summary (the gate does this).
//   - A status write that failed validation briefly stood: joiners that
//     read it wait until the revert (safe direction). One whose revert
//     failed stays, restricted and marked, until the same term writes again
//     or the next term fences (liveness only).
//   - The fence lives on the status Lease. Removing the finalizer of a
//     deleted status by hand, or the term annotation, resets it: an
//     operator does so only when no deposed leader may still write (a
//     leader's Fence that finishes a deletion carries the fence on
//     instead; see above). Tokens must never go back; if they do, Fence
//     returns a *versiongate.FencedOffError naming the annotation and how
//     to clear it. With the Kubernetes Lease election (election/lease),
//     tokens go back across a delete of the election's Lease exactly when
//     its doc says: when the new Lease's creationTimestamp is not a later
//     second than the old one's (a Lease deleted and created again within
//     a second of its creation, or within the clock skew between HA
//     apiservers plus a second: 1 s apart, about two seconds), and the
//     candidate that takes it did not see the old Lease's last term (not
//     merely the old Lease); and when an apiserver's clock goes back or
//     an etcd backup is restored. No term can lead then until an operator
//     clears the fence.
//   - A listing is a LIST in pages of Config.ListPageSize (500 by
//     default): the first page, resourceVersion unset, is a consistent
//     read, and the continue token keeps the later pages at its revision,
//     so the pages are one snapshot; a token expired between pages starts
//     the listing again, at most three times
//     (TestListRecordsPagesAreOneSnapshot). A listing of more records than
//     the server can page through before it compacts fails then.
//   - Not Byzantine-tolerant: a node can publish any value.
//   - Fleet size: every gate lists and watches every record (the gate
//     learns the newest release and its blockers from them), but records
//     change only when nodes join or leave; the keep-alives go to the
//     heartbeats, which only the reaper watches. So a renewal period costs
//     the apiserver O(N) watch events, all to the reaper, and every other
//     gate receives only the reaper Lease's renewals (one per 10s)
//     besides membership changes (TestOnlyTheReaperReceivesKeepAlives).
//     With heartbeats of the store's own, the renewals are writes, N×3
//     per RecordTTL; large fleets want node Leases, or a RecordTTL near
//     40s (the kubelet's node Lease duration). The figures behind this,
//     measured with cmd/bench/versiongate -big 1000, are in
//     cmd/bench/versiongate/README.md.
//
// # Records kept alive by node Leases
//
// With Config.NodeLease a node's record is kept alive by the node's own
// heartbeat Lease (kube-node-lease/<node>, which nodestatus or a kubelet
// renews) instead of a heartbeat of the store's: the record Lease
// <gate>-<node> in Namespace names it. The store never writes node
// Leases (TestNodeLeaseWithNodestatus counts its writes), so a host that
// runs nodestatus pays for one renewed Lease per node: the record costs no
// request in steady state (go run ./cmd/bench/versiongate -only nodelease
// measures it). Wiring, with no adapter (see the root package's
// Example_nodeLeaseRecords):
//
//	kubestore.Config{..., NodeLease: &kubestore.NodeLeaseConfig{Heartbeat: nodeController.LeaseRenewal}}
//
// What it rests on:
//
//   - Publishing reads the node Lease (GET, linearizable), which must be
//     the object Heartbeat reports renewing, and creates the record naming
//     it. A record already there naming another object of that node Lease
//     (deleted and created again, as the garbage collector and nodestatus
//     do when a Node goes) is an orphan, replaced at once, conditioned on
//     its UID and resourceVersion; this store's own record is replaced at
//     once; another publisher's (an earlier run of the host) once it has
//     been unchanged for the TTL plus the margin since this store first
//     found it, while this process's heartbeat renews the Lease
//     (TestNodeLeasePublishConditionedOnRead,
//     TestNodeLeaseOwnRecordRepublished).
//   - The reaper lists and watches every Lease in the node Lease namespace
//     and judges each as above; it deletes a record naming a dead one
//     after reading the node Lease again (GET): the read shows any renewal
//     the node's gate had learned of, since nodestatus reports a renewal
//     once it is applied (TestNodeLeaseExpiryConditionedOnJudgedVersion).
//     The TTL is the node Lease's duration (40s with nodestatus' defaults),
//     not the gate's RecordTTL: a dead node holds back a restrict for up
//     to 44s.
//   - KeepAlive sends nothing. It, and PublishRecord, report the TTL left
//     from Heartbeat's last send time, on the store's Clock (Heartbeat's
//     times must be on it), so the gate stops serving at that send plus
//     TTL less its margin, before the reaper, which counts from a later
//     sighting, can judge the record dead
//     (TestNodeLeaseKeepAliveCountsFromSend). Creating the record renews
//     nothing the reaper judges, so a publish never counts from itself; it
//     waits while no renewal was sent within the TTL. It
//     reports ErrRecordLost when the heartbeat renews another Lease object,
//     when this store saw the record deleted or replaced, or when no
//     renewal was sent within the TTL. The gate publishes again with
//     RejoinAfterRecordLoss, which hosts in this mode should set.
//
// Its limits, beyond those above:
//
//   - A record lives while its node heartbeats, not while its gate runs: a
//     gate that stopped without DeleteRecord (a lost record while the
//     heartbeat went on, a crash with the heartbeat in another process)
//     leaves a member that holds back restricts until the gate publishes
//     again or the Lease stops being renewed (liveness only).
//   - Replacing another publisher's record rests on nodestatus' own
//     assumption, one heartbeat per node: the earlier run's last renewal
//     was sent before this one's, so its gate has stopped. Two processes
//     publishing one node's record, each with its own heartbeat of that
//     node, break it.
//   - RBAC: get, list and watch on leases in the node Lease namespace,
//     besides the verbs above in Namespace.
//   - The reaper receives every renewal of every Lease in the node Lease
//     namespace, gates or not (N per renewal interval); no other gate
//     receives any.
//   - The margins are one. The gate stops serving at the last send plus
//     the node Lease's duration less a tenth of that duration (at least
//     500ms), which PublishRecord reports as RecordLease.Granted; the
//     reaper waits the node Lease's duration plus the same margin. With
//     node Leases of 40s that is 4s + 4s = 8s of slack for clock rates
//     and pauses, less the reaper's detection delay, whatever the gate's
//     RecordTTL (TestMarginFromTheGrantedLease in the root package,
//     TestNodeLeaseGateMarginFromTheNodeLease here).
//   - A record deleted by hand is taken as its node's death at once, as
//     before: the store cannot stop a node Lease it does not write, so its
//     heartbeat proves nothing. The node serves until its gate's next
//     KeepAlive, which reports the loss (it sends nothing, so at the
//     gate's keep-alive period, RecordTTL/3, after its store's watch saw
//     the delete). A leader waiting to restrict writes the restricted
//     status at once and reconciles SettleTime later, so the node has
//     stopped before the reconcile only while RecordTTL/3 is below
//     SettleTime (the defaults: 3.3s and 5s;
//     TestNodeLeaseRecordDeletedByHandMidRestrict). Delete records in
//     this mode only once their nodes have stopped.
package kubestore
