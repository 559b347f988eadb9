// Package kubestore is versiongate's Store on the Kubernetes API alone:
// node records and the status are coordination.k8s.io/v1 Leases in one
// namespace, every write carries a resourceVersion precondition, and every
// read a decision rests on is linearizable (GET or LIST with
// resourceVersion unset, never "0", never an informer cache). It compiles
// no etcd client and no gRPC (TestNoEtcdDependencies).
//
// [New] builds a [Store] from a client, a namespace and a gate name:
//   - each node's record is the Lease <gate>-<nodeID>, labelled
//     reconkit.io/gate=<gate> and reconkit.io/role=record, its value in the
//     annotation reconkit.io/value (base64), with holderIdentity,
//     leaseDurationSeconds and renewTime set. Node IDs must make valid
//     object names; "status" is reserved;
//   - the status is the Lease <gate>-status (role=status): its value in
//     reconkit.io/value, the fencing term in reconkit.io/term, and the
//     finalizer reconkit.io/versiongate-status.
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
// Expiry is an observer's judgement. Every Store judges every record it
// lists or watches by its own monotonic clock: a record whose
// resourceVersion has not changed for its leaseDurationSeconds plus the
// gate's margin (max(TTL/10, 500ms)) since this process first saw that
// resourceVersion is dead, and is deleted with a precondition on that
// resourceVersion and UID (a renewal in between makes the delete fail).
// A listing is one LIST's snapshot, a record reaped after it included
// (TestListAfterReapIsOneSnapshot); the watch from its revision, and
// WatchRecords, report the deletion. PublishRecord judges a record in its way the same way.
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
//   - A record is deleted by an observer only as the object and
//     resourceVersion it judged dead (TestReapConditionedOnJudgedVersion).
//   - A cut-off node stops serving before any observer can delete its
//     record, at default settings: its gate fences itself at the start of
//     its last acknowledged keep-alive plus TTL − margin; an observer first
//     saw that keep-alive's resourceVersion after it started, and waits
//     TTL + margin from then (TestCutOffNodeStopsBeforeObserverDeletes:
//     with the default 10s TTL, stopped 7.3s after the cut, deleted at 10s).
//   - A deleted status is never a first boot: the finalizer keeps it,
//     terminating; every status operation then fails with ErrStatusDeleted,
//     naming the Lease and how to clear it, and the gate waits
//     (TestStatusDeletedIsUnreadable, TestGateWaitsOnDeletedStatus). So
//     a status Lease without a value proves a first boot
//     (StoredStatus.FirstBoot), which the leader logs at info level, not
//     as a deleted status (TestFirstBootAmongRecordsIsInfo). An operator
//     who removes the finalizer of a deleted status makes the next one a
//     first boot too.
//   - A watch the server ends is reopened from the last revision seen,
//     after a pause that grows while watches deliver nothing; 410 Gone
//     returns ErrWatchExpired and the caller lists again
//     (TestWatchEndingAtOnceDoesNotSpin). A keep-alive is not reported as a
//     change.
//
// # Limits
//
//   - Clocks and pauses: the cut-off guarantee assumes the node's and the
//     observers' clocks run at rates that differ by less than the margin
//     over a TTL, and that no process pause (GC, SIGSTOP, a frozen VM)
//     exceeds 2 × margin minus the observer's detection delay; a node
//     paused longer can serve after its record is deleted, as with any
//     lease. etcd's server-side expiry is independent of the client's
//     clock; here the deleting observer's clock counts.
//   - A dead node's record stays until some Store lists or watches it for
//     TTL + margin: with no gate running, nothing is deleted (liveness
//     only).
//   - A Store's validation knows only what that Store delivered: the
//     gate's WriteStatus must go through the Store whose ListRecords and
//     WatchRecords built its summary (the gate does this).
//   - A status write that failed validation briefly stood: joiners that
//     read it wait until the revert (safe direction). One whose revert
//     failed stays, restricted and marked, until the same term writes again
//     or the next term fences (liveness only).
//   - The fence lives on the status Lease. Removing the finalizer of a
//     deleted status, or the term annotation, resets it: an operator does
//     so only when no deposed leader may still write. Tokens must never go
//     back; if they do, Fence returns a *versiongate.FencedOffError naming
//     the annotation and how to clear it.
//   - A listing is a LIST in pages of Config.ListPageSize (500 by
//     default): the first page, resourceVersion unset, is a consistent
//     read, and the continue token keeps the later pages at its revision,
//     so the pages are one snapshot; a token expired between pages starts
//     the listing again, at most three times
//     (TestListRecordsPagesAreOneSnapshot). A listing of more records than
//     the server can page through before it compacts fails then.
//   - Not Byzantine-tolerant: a node can publish any value.
//   - Fleet size: every gate lists and watches every record (the gate
//     learns the newest release and its blockers from them), and on the
//     Kubernetes API a keep-alive is a write that every watcher receives,
//     so the apiserver sends N² events per renewal period, in either record
//     mode; on etcd a keep-alive writes nothing that a watch sees. On a
//     2-core machine running the servers, 200 gates held (apiserver 0.45
//     cores, 391 MiB; with records on node Leases 0.31 cores) and 1,000 did
//     not: renewals were late, observers judged live records dead, and the
//     leader's validation kept failing. cmd/bench/versiongate measures it.
//
// # Records on node Leases
//
// With Config.NodeLease a node's record lives on the node's own heartbeat
// Lease (kube-node-lease/<node>, which nodestatus or a kubelet renews): a
// label NodeLeaseKeyPrefix+<gate> holding a token new at every publish,
// and an annotation of the same key holding the value. Several gates
// share a Lease, each under its own key. A host that runs nodestatus
// then pays for one Lease per node: the record costs no request in steady
// state (TestNodeLeaseWithNodestatus; go run ./cmd/bench/versiongate
// -only nodelease measures it). The status stays a Lease in Namespace. Wiring,
// with no adapter (see the root package's Example_nodeLeaseRecords):
//
//	kubestore.Config{..., NodeLease: &kubestore.NodeLeaseConfig{Heartbeat: nodeController.LeaseRenewal}}
//
// What it rests on:
//
//   - Publishing reads the Lease (GET, linearizable) and writes the label
//     and annotation in a merge patch conditioned on the resourceVersion
//     read; it waits until Heartbeat reports a renewal of that very Lease
//     object. DeleteRecord and expiry remove them the same way, never the
//     Lease (TestNodeLeasePublishConditionedOnRead,
//     TestNodeLeaseExpiryConditionedOnJudgedVersion). nodestatus renews by
//     an update from its last copy; one the record's write made stale gets
//     409, reads the Lease again and keeps every label and annotation.
//   - A record's identity for observers is the Lease's UID with the
//     publish's token, so a record published again, or on a Lease
//     created again, is a new record, as a new Lease is in the other
//     mode: the restrict's write-then-validate, its argument and fencing
//     are unchanged. Leases are one resource, so the records' and the
//     status' resourceVersions are one counter.
//   - Expiry is judged as above: the record is dead once its Lease's
//     resourceVersion has not changed for its leaseDurationSeconds plus the
//     margin on the observer's clock; heartbeats change it. The TTL is the
//     node Lease's duration (40s with nodestatus' defaults), not the gate's
//     RecordTTL: a dead node holds back a restrict for up to 44s.
//   - KeepAlive sends nothing. It reports the TTL left from the later of
//     Heartbeat's send time and the record's own write, on the store's
//     Clock (Heartbeat's times must be on it), so the gate stops serving
//     at that send plus TTL less its margin, before any observer, which
//     counts from a later sighting, can judge the record dead
//     (TestNodeLeaseKeepAliveCountsFromSend). It reports ErrRecordLost
//     when the heartbeat renews another Lease object (deleted and created
//     again, as the garbage collector and nodestatus do when a Node goes),
//     when this store saw the record removed or replaced, or when no
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
//   - A record of another publisher (an earlier run of the host) is
//     replaced once its token has been unchanged for the TTL plus the
//     margin since this store first found it, while this process's
//     heartbeat renews the Lease. That rests on nodestatus' own
//     assumption, one heartbeat per node: the earlier run's last renewal
//     was sent before this one's, so its gate has stopped. Two processes
//     publishing one node's record, each with its own heartbeat of that
//     node, break it.
//   - Observers that expire records write to node Leases: the client
//     needs get, list, watch and patch on leases in the node Lease
//     namespace, besides the status' verbs in Namespace. An expiry, a
//     publish or a delete costs the node's heartbeat one 409 and a GET.
//   - Listings and watches select by the label: the apiserver filters
//     kube-node-lease for them, and every watcher receives every renewal
//     of every labelled Lease (N renewals per RenewInterval to N nodes).
package kubestore
