// Package lbrecontest provides an in-memory [lbrecon.Engine] for tests and
// simulations that models the adversities of real provider APIs, each behind
// a knob of [Config]: every call takes a latency on an injected clock;
// created objects stay pending for a while; listings lag behind writes (new
// objects invisible, deleted objects still listed, updates and tags seen
// late: a fixed ListLag, a count of listings, or read replicas with a
// random lag per object and per listing that can go backwards, ReplicaLag);
// deletion is asynchronous; references are enforced (a parent in use
// cannot be destroyed, a child cannot be created under a missing parent);
// names can be unique and length-limited; two binds can be refused one
// address and port (UniqueBinds); identifiers can be unique per kind only;
// untagged objects are listed only
// within the queried scope; faults (failed, rate-limited with Retry-After,
// crashed between create and tag, failed tagging, an outage answering 503
// to everything for a while, one create answer in k lost) can be
// injected; calls can be throttled by a token bucket (Rate, Burst);
// writes can be fenced by token (Fence); idempotency tokens can be
// honoured (Idempotency); the list lag
// can be declared to the reconciler (DeclareListLag); a [Crasher]
// in front of any engine stops the process at a crash point (before or
// after its n-th write, or at a time); a provider can have load-balancer
// objects of its own whose address it assigns late ([ELB]: listeners,
// pools, members, health monitors; [HAProxy]: frontends with binds on
// that address); and calls
// are counted both as calls and as provider requests under a cost model in
// which a List costs 1 + N requests (a tag search followed by one GET per
// object found).
//
// It implements [lbrecon.Repairer] and [lbrecon.Updater] (each can be
// switched off), knows the references of the load-balancer plan's specs,
// and tracks, per parent, the fewest children it held (see [Engine.Low]).
// Tests wait for a state with [Engine.WaitFor] or [Engine.WaitConverged]
// on a deadline instead of polling: the engine wakes them at every change
// and when a pending period or a deletion ends on its clock. The test
// hooks ([Engine.Put], [Engine.DeleteObject], [Engine.SetObjectState]) act
// outside the API and address one object by kind and ID.
//
// # What it does not model
//
//   - ListLag and LagListings are fixed and monotonic; only ReplicaLag
//     draws a lag per object and per listing (uniform, from Seed), and
//     it does not combine with them. Replicas lag on List only, and the
//     state an object shows (pending, ok) is its state at the drawn time.
//   - Get by ID is strongly consistent (it sees every write at once); on
//     some providers a describe call lags too.
//   - There is no pagination: one List is one call, whatever N.
//   - Latency is the same for every call and does not grow with the size of
//     an answer; the effects of calls never overlap (one mutex), although
//     their latencies do.
//   - Rate limits come from injected faults or from one token bucket for
//     every call (Rate, Burst); a real provider has buckets per API and
//     per account.
//   - Specs are stored as given: there is no server-side defaulting unless a
//     test sets a Default hook.
//   - Two binds on one address and port are refused only with
//     UniqueBinds, and only binds listen: a frontend has no port of its own.
//   - Fencing tokens are checked only with Fence, and then on every write
//     when it takes effect, against one highest token for the whole
//     provider; a real provider keeps it per object or per account, or
//     (most) not at all: then wrap the engine with lbrecon.Guard and
//     lbrecon.CheckToken.
//   - Addresses come from one pool, never reused; a load-balancer
//     object (LoadBalancerObjects, set by [ELB] and [HAProxy]) gets an
//     address and the DNS name "<name>.lb.example" as its
//     [lbrecon.Object.Status], VIPDelay after it is ok, and keeps them
//     until a test moves the address ([Engine.Reassign]). A listener's
//     port is not checked for duplicates on its load balancer; deleting
//     a load balancer through the API is refused while it has children
//     (Integrity), and only [Engine.DeleteTree] removes it with them.
package lbrecontest
