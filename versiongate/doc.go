// Package versiongate runs a leader-only reconcile safely in a cluster
// whose nodes run different releases, and holds each node's start-up until
// the reconciled state is compatible with its release.
//
// Every node runs a Gate. The gate watches the node records under a prefix
// in etcd and keeps a summary of the releases they run. Only a node with
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
// decode is logged and skipped.
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
//     exists: the restricted status is written in one transaction guarded by
//     the term (Term.Guard) and by the nodes prefix' mod revision not having
//     moved past the summary that showed no such node.
//   - Every status write is guarded by the term. The reconcile function is
//     not: it receives the term's fencing token and a context that ends with
//     the term, and must pass the token on where its target can check it.
//     Targets that cannot (the Kubernetes API) are protected only on a
//     best-effort basis by SettleTime, the wait before a new leader's first
//     reconcile; the periodic reconcile repairs what a deposed leader's late
//     request undid.
//   - The gate stalls rather than act on what it does not know: an absent
//     or corrupt status blocks WaitReady and is overwritten only after a
//     successful reconcile; an unknown newer release stops this node from
//     campaigning. It is not Byzantine-tolerant: a node that lies about its
//     release defeats it.
//   - The status is read and written with etcd's linearizable requests; no
//     clock comparisons between nodes are made. SettleTime and the
//     reconcile period run on Config.Clock.
//
// # Leadership
//
// versiongate depends on no election package. A host wires its election in
// through Candidate and Term; a term of reconkit's etcd election is a Term
// as it is (its token is a plain uint64, its Guard the comparison on the
// candidate key), so the wiring is one line:
//
//	Candidate: versiongate.CandidateOf(elector.CampaignEtcd)
//
// The Campaign context bounds the wait only. The gate resigns a term
// strictly after its leader work, the reconcile included, has returned, on
// every path: a newer release joining, Run ending, a failed term. Leading
// and LeadingChanged report the gate's leadership without a request.
//
// # A node that is cut off
//
// With gate-owned records, Run keeps a local validity deadline for the
// node's record on RecordClock (the real monotonic clock by default): the
// start of the last keep-alive the server acknowledged, plus the TTL, less a
// margin of a tenth of the TTL (at least 500ms). When it passes, the node
// stops serving at once (Ready reports false, WaitReady returns
// ErrRecordLost, Run returns ErrRecordLost), before the server can expire
// the record and so before any leader can see the node gone. A leader that
// then restricts the status still waits SettleTime before it reconciles,
// for requests of the earlier reconciler still in flight. The record is
// created only if absent: a second process with the same NodeID waits,
// logging, until the first one's record is gone.
package versiongate
