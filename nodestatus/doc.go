// Package nodestatus keeps a Kubernetes Node registered, alive and reporting
// the status a custom node agent (a NodeProvider) describes.
//
// A NodeController registers the Node (creating it, or adopting an existing
// one), heartbeats through a coordination.k8s.io/v1 Lease in kube-node-lease
// and writes the Node's labels, annotations and status with three-way
// strategic merge patches on the status subresource.
//
// # Guarantees
//
//   - Fields others write survive: labels, annotations and status list
//     entries (conditions, addresses) are only deleted if this controller
//     wrote them before. What it last wrote is kept in the
//     AnnotationLastApplied annotation; an unreadable record is ignored, so
//     the next write upserts and deletes nothing. The spec is written only
//     when the Node is created (and unschedulable on ShutdownCordon).
//   - The lease is held by the node's name, lasts LeaseDuration (40s), is
//     renewed every RenewInterval (10s) plus up to 4% jitter, measured from
//     the end of the previous renewal, and retried with backoff (200ms up to
//     7s) until it succeeds. It is owned by the Node, so it goes with it, and
//     its owner reference follows the Node when it is recreated. New refuses
//     a renew interval that cannot renew twice within the node lifecycle
//     controller's grace period (40s by default).
//   - Where the Lease API is missing (an unnamed 404, confirmed by
//     discovery), or with DisableLease, heartbeats are status writes every
//     RenewInterval.
//   - Steady state with defaults: one lease update per RenewInterval and one
//     status PATCH per StatusReportInterval (5 min), no GET. The Node is
//     read only at start, after a 409 Conflict (every status patch carries
//     the resourceVersion of the copy it was computed against), after a 404,
//     and when the lease turns out to have been recreated. A status that
//     changed in nothing but heartbeat times is not written.
//   - Ping runs on its own goroutine with PingTimeout. A failing Ping sets
//     Ready=False (reason ReasonPingFailed) while the lease keeps renewing:
//     reachability and health stay separate, unless PingFailure says
//     otherwise.
//   - A Node deleted by someone else is registered again (unless
//     DisableReRegister), as soon as the controller notices: at its next
//     status write, or at once when the garbage collector removed the lease
//     with the Node.
//   - Run blocks until every goroutine it started has returned. An idle
//     controller holds one goroutine (Run's own) and three timers; pings,
//     renewals and status writes run on short-lived goroutines, at most one
//     of each at a time.
//
// # Assumptions
//
//   - One controller per node name. Two controllers for the same node fight
//     over the lease and the status.
//   - The Lease is written by this controller alone; a stale copy costs a
//     GET and a retry, as with the kubelet.
//   - Without a watch, changes others make to fields this controller owns
//     are corrected at its next status write (at most StatusReportInterval
//     later), not at once. After a heartbeat gap longer than the grace
//     period the Node is read back and its status restored at once, since
//     the node lifecycle controller may have marked it Unknown.
//   - Clients shared by many controllers need a rate limit that fits:
//     about 0.11 requests per second per node with default settings.
package nodestatus
