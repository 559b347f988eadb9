// Package nodestatus keeps a Kubernetes Node registered, alive and reporting
// the status a custom node agent (a NodeProvider) describes.
//
// A NodeController registers the Node (creating it, or adopting an existing
// one), heartbeats through a coordination.k8s.io/v1 Lease in kube-node-lease
// and writes the Node's labels, annotations and status with patches on the
// status subresource, next to the other controllers that share the Node (the
// node lifecycle controller, the cloud node controller, the attach/detach
// controller, administrators).
//
// # Guarantees
//
//   - One source of truth for the Node: Config.Node is the base, and
//     every node the provider notifies is laid over it (see NodeProvider
//     for the rule). Registration labels, annotations, taints, addresses
//     and conditions set in Config.Node are never dropped by a
//     notification; the provider's value wins where both set one, and
//     the provider can remove only what it added.
//   - Provider is a production NodeProvider: SetCondition,
//     RemoveCondition, ReportCondition (the method checkpoint's
//     Conditions field takes), SetAddresses, SetCapacity, SetNodeInfo and
//     Update, with bursts of changes coalesced into one notification.
//   - Fields others write survive. Labels, annotations, conditions and
//     the other status fields are merged three-way against what this
//     controller last wrote (the AnnotationLastApplied record): only what
//     it wrote before is ever deleted. Conditions of types it does not
//     report are never touched. nodeInfo and daemonEndpoints fields the
//     provider leaves empty are not written, so they do not overwrite
//     others' values. An unreadable record is ignored: the next write
//     upserts and deletes nothing.
//   - Addresses are replaced as a whole (a `$patch: replace` list, as the
//     kubelet sends), since their merge key, type, is not unique: dual-stack
//     lists change correctly both ways. A provider that never reported
//     addresses leaves others' addresses alone.
//   - Only real differences are written: a patch is applied to the served
//     Node as the API server would apply it, and nothing is sent if that
//     changes nothing; element order alone is never a change.
//   - A request the API server refuses for good (a 4xx other than 404,
//     409 and 429: an invalid label, a label the NodeRestriction admission
//     plugin forbids, annotations over 256 KiB) is never sent again as it
//     is. The write falls back to the status without the provider's
//     labels and annotations, then to the conditions alone, so the Ready
//     condition, a failing ping and the heartbeat are still written. What
//     was refused is remembered: until the provider's status changes,
//     every later write (reports, heartbeats, recoveries, and a
//     registration, which falls back the same way) starts from the form
//     the API server accepted, with no new ErrorHandler call or
//     Warning event; a changed status is tried in full again. Transient
//     failures (5xx, timeouts, 429 after its Retry-After) are retried with
//     backoff, each attempt computed from the provider's newest status.
//     The ErrorHandler and the Metrics hook see every request's outcome.
//   - The lease's holder is the node's name; it lasts LeaseDuration (40s), is
//     renewed every RenewInterval (10s) plus up to 4% jitter, measured from
//     the end of the previous renewal, and retried with backoff (200ms,
//     never more than 5s between attempts, jitter included) until it
//     succeeds. It is owned by the Node, so it goes with it, and its owner
//     reference follows the Node when it is recreated. A lease deleted
//     under the controller is created again by the renewal itself, owned
//     by the Node as read then (a linearizable GET through LeaseClient). New refuses timings
//     where one renewal that hangs until RequestTimeout, and its retry,
//     could leave a gap between heartbeats longer than the node lifecycle
//     controller's grace period (default 50s, kube-controller-manager's).
//     Lease renewals can go through a client of their own (LeaseClient), so
//     status traffic never throttles the heartbeat.
//   - Controllers of one process can share a Limiter (a
//     *semaphore.Weighted): no more of them than its size register or
//     write status at once. A Run waiting for it has started nothing (no
//     goroutine, no ping, no request); a unit is held for one attempt,
//     never across a retry wait, so nodes that keep failing cannot starve
//     the others; lease renewals and the shutdown action never wait for
//     it.
//   - Bounded recovery: after any failed renewal, after heartbeats resume
//     (PingFailureStopHeartbeat and a ping that succeeds again), and after
//     the lease vanished, the Node is read back at once with a
//     linearizable GET (resourceVersion unset, never the apiserver's
//     cache) and a heartbeat is written against that copy, a patch the
//     API server checks by resourceVersion. What the node lifecycle
//     controller changed meanwhile is restored, and an Unknown it writes
//     just after the read makes the patch fail with 409, so the Node is
//     read and written again: the Ready status is back within one retry
//     wait (at most 5s) of the heal, not at the next status report, and
//     the node lifecycle controller lifts its taints at its next pass.
//     Conditions the provider does not report
//     (MemoryPressure, DiskPressure, PIDPressure by default, see
//     DefaultConditions) are reported False by the controller, so none
//     stays Unknown after an outage.
//   - Where the Lease API is missing (an unnamed 404, confirmed by
//     discovery), or with DisableLease, heartbeats are status writes every
//     RenewInterval.
//   - Steady state with defaults: one lease update per RenewInterval and one
//     status PATCH per StatusReportInterval (5 min), no GET: about 6.1
//     requests per node per minute, the kubelet's budget. Every status patch
//     carries the resourceVersion of the copy it was computed against, so
//     each report is also a check of the served Node: a Node changed by
//     others answers 409, is read again and the report recomputed. The Node
//     is also read at start, after a 404, after failed or stopped
//     heartbeats and when the lease vanished.
//   - Request budget: whatever the API server answers for good (403, 404,
//     409, 410, 422, 429, 5xx, a refused or reset connection), each loop
//     (lease renewal, status writes) sends at most one request per second
//     from 30 s on, its waits jittered; most answers cost about 0.25
//     requests per second per loop. A write refused with 409 is read again
//     at once only if the attempt had not just read it, and a lease found
//     missing and not created is created again without reading it first:
//     at most two requests per retry wait. After an API server restart a
//     node sends its next renewal within 5 s, one linearizable GET of the
//     Node and one status patch (TestRequestBudgetUnderPersistentAnswers,
//     TestRequestsAfterAPIServerRestart; BUDGETS.md has the table).
//   - Ping runs on its own goroutine with PingTimeout. A failing Ping sets
//     Ready=False (reason ReasonPingFailed) while the lease keeps renewing:
//     reachability and health stay separate, unless PingFailure says
//     otherwise.
//   - A Node deleted by someone else is registered again, with the spec of
//     the provider's newest node, only with ReRegister: the cloud
//     node-lifecycle controller deletes NotReady nodes whose instance it
//     cannot find, and re-registering fights it. Without it, Run returns an
//     error wrapping ErrNodeDeleted.
//   - ShutdownCordon undoes, at the next start, only its own cordon: the
//     AnnotationCordoned mark must be there and this controller's field
//     manager must be the only owner of spec.unschedulable. A
//     `kubectl uncordon` followed by an administrator's cordon or drain is
//     left alone, and the stale mark removed.
//   - Run blocks until every goroutine it started has returned, and
//     returns nil when its context ends; an error only for a real failure.
//     An idle controller holds one goroutine (Run's own) and three timers;
//     pings, renewals and status writes run on short-lived goroutines, at
//     most one of each at a time. Between uses, the provider's node, the
//     served Node and the Lease are kept in their protobuf encoding, one
//     buffer each: about 15 KiB per node in all (heap in use and stacks,
//     New and the shared client-go client included) at 1,000 and 2,000
//     nodes on a real API server when the controllers share a Limiter,
//     about 28 KiB when they all register at once without one, at any load
//     of the machine (go run ./cmd/bench/nodestatus -mode scale-real
//     [-limit 0]).
//
// # Assumptions
//
//   - One controller per node name. Two controllers for the same node fight
//     over the lease and the status.
//   - The Lease is written by this controller alone; a stale copy costs a
//     GET and a retry, as with the kubelet.
//   - Without a watch, changes others make to fields this controller owns
//     while heartbeats succeed are corrected at its next status write (at
//     most StatusReportInterval later), not at once.
//   - A renewal that hangs on a dead connection is bounded by
//     RequestTimeout; closing dead connections is the client's business
//     (client-go's HTTP/2 health check, or a dialer the host rotates from
//     its ErrorHandler, as the kubelet does).
//   - Clients shared by many controllers need a rate limit that fits:
//     about 0.11 requests per second per node with default settings.
package nodestatus
