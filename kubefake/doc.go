// Package kubefake is client-go's fake clientset with the apiserver's
// optimistic concurrency, and with the adversities of a real apiserver
// behind a real network: partitions, injected answers, rate limits, a
// lagging watch cache, watches that end, latency.
//
// client-go's fake clientset (k8s.io/client-go/kubernetes/fake) keeps no
// resourceVersion on the objects it stores: an Update from a stale read
// succeeds where the apiserver answers 409 Conflict. Two Lease candidates
// on it can both take the same Lease and both lead, and a compare-and-swap
// store passes its tests with or without its compare. [NewClientset]
// returns that same clientset, so every typed client, reactor and tracker
// call works as before, with reactors in front of its tracker. It is the
// one-client shortcut of [Config.NewServer] and [Server.NewClient]: a
// [Server] is one store that any number of [Client]s share, each a fake
// clientset over a network of its own.
//
// # What it models
//
//   - one resourceVersion counter across all resources, raised by every
//     create, update, patch and delete that changes something, as etcd's
//     revision is; uid and
//     creationTimestamp set on create (from [Config.Clock]); uids, and
//     the suffixes of generateName, come from a sequence of the server's
//     own, not from a random source, so that a run given the same
//     requests in the same order gives the same answers (a uid is unique
//     within one server, not across servers);
//   - Update carrying a resourceVersion other than the stored one: 409
//     Conflict; Update carrying none is unconditional where the resource
//     allows it (configmaps, secrets, nodes, pods and most others) and
//     422 Invalid ("metadata.resourceVersion: ... must be specified for
//     an update") where it does not: leases, leasecandidates,
//     poddisruptionbudgets, some storage.k8s.io, node.k8s.io and
//     certificates.k8s.io resources, and admissionregistration.k8s.io;
//     Create carrying a resourceVersion: 400;
//   - merge and strategic merge patches that set metadata.resourceVersion,
//     and JSON patches that test it: the precondition is checked on the
//     patched object, as the apiserver does (409, or 422 for a failed
//     test operation); server-side apply is the tracker's, without a
//     precondition;
//   - an update or patch that changes nothing writes nothing: the answer is
//     the stored object at its resourceVersion, and no watch event is
//     sent, as the apiserver skips a write whose bytes are unchanged;
//   - Delete with Preconditions (resourceVersion, uid): 409 on mismatch;
//     Update carrying a uid other than the stored object's: 409, as the
//     apiserver takes the uid as a precondition (an object deleted and
//     created again under its name is another object); a patch that
//     changes the uid: 422;
//   - finalizers: deleting an object that has some sets its
//     deletionTimestamp (and a deletionGracePeriodSeconds of 0); no
//     finalizer can be added to it then (422, "no new finalizers can be
//     added if the object is being deleted"); the write that removes the
//     last one is not stored but deletes the object as it was (the
//     DELETED event carries its finalizers, at the deletion's
//     resourceVersion; the writer gets its own object back), unless a
//     pod's grace period still runs;
//   - graceful pod deletion: deleting a pod bound to a node that has not
//     terminated sets its deletionTimestamp to now plus its grace period
//     (the request's, else spec.terminationGracePeriodSeconds, else the
//     apiserver's default of 30s) and deletionGracePeriodSeconds, and
//     keeps the pod; a later delete may only shorten the period, and one
//     of 0 removes it. A pod bound to no node, or Succeeded or Failed, is
//     removed at once after a write that marks it (a watch sees MODIFIED
//     then DELETED), as on the apiserver;
//   - List returns the resourceVersion it was served at in its ListMeta,
//     and applies label and field selectors, where client-go's fake
//     applies labels only;
//   - field selectors as the apiserver (1.37) takes them, on lists and
//     watches: metadata.name and metadata.namespace on every resource,
//     and the fields the core resources, Jobs and
//     CertificateSigningRequests register (a pod's spec.nodeName,
//     status.phase and the rest, a node's spec.unschedulable, a
//     secret's type, an event's involvedObject.*...); a field the
//     resource does not select on is refused with 400 Bad Request, as
//     the apiserver refuses it, never answered with an empty list;
//   - reads as the apiserver serves them: a Get or List with no
//     resourceVersion is linearizable (the store); with "0" it is served
//     from the watch cache, whatever that holds; with a number it is not
//     older than that number (the cache, caught up to it if it must);
//   - Watch from a resourceVersion replays every change after it, in order,
//     with label and field selectors applied, served from the watch cache; an object that stops matching
//     the selectors arrives as DELETED (its last matching state, at the
//     change's resourceVersion) and one that comes to match as ADDED, as
//     the apiserver sends them; a watch from before the kept
//     history ([Config.WatchHistory], [Config.WatchWindow]) opens and
//     sends one ERROR event, a 410 Gone with reason Expired, then ends,
//     as the apiserver's watch cache answers it (Watch itself does not
//     fail); a DELETED event
//     carries the deletion's own resourceVersion; a slow reader never
//     blocks writers.
//
// # Knobs
//
//   - Partitions: [Client.Cut] refuses every request of one client, as a
//     refused connection does (a *url.Error wrapping ECONNREFUSED, for
//     which utilnet.IsConnectionRefused is true), and ends its open
//     watches; [Client.Heal] ends the partition. Other clients go on.
//   - Injected answers: [Server.Inject] a [Fault] by verb, resource,
//     subresource, namespace, name or predicate, for a number of
//     requests or until [Server.ClearFaults]: [TooManyRequests] (429 with
//     Retry-After), [InternalError] (500), [Unavailable] (503),
//     [Conflict] (409), [Timeout] (504), [ServerTimeout], [ConnectionReset],
//     [Fail] with any error, and [RateLimit], a token bucket on a clock.
//     Fault.AfterWrite, and [LostAnswer], apply the write and lose its
//     answer, which makes a writer's idempotency testable.
//   - Lag: [Config.CacheLag] keeps each resource's watch cache that many
//     changes behind the store; [Server.PauseCache] stops it until
//     [Server.SyncCache]. Cached reads then see older objects, and
//     watches deliver late, never out of order; a read not older than a
//     resourceVersion the paused cache has not reached fails with 504
//     (Too large resource version), as the apiserver's does after its wait.
//   - Watch endings: [Server.EndWatches] ends every open watch, as a
//     dropped connection does; [Config.WatchLifetime] ends each watch that
//     long after it began, as --min-request-timeout does. Clients must
//     watch again from the last resourceVersion they saw.
//   - Restarts: [Server.Restart] is an apiserver restart over a store
//     that lives on: every watch ends, and the watch history starts
//     again empty, so a watch from any resourceVersion handed out before
//     it gets 410 Gone and the client must list again.
//   - A bounded watch window: [Config.WatchHistory] keeps that many
//     changes (across resources), and [Config.WatchWindow] drops changes
//     older than a duration on the clock, as etcd's compaction does.
//   - Request budgets: [Client.Requests] counts the requests a client
//     sent, by verb, resource and subresource, so a test can hold a loop
//     to a number of requests per unit of fake time without a reactor.
//   - Latency: [Config.Latency] makes every request wait on the clock
//     ([Config.Clock] when it is a clock.Clock, so that fake clocks and
//     synctest bubbles see the time pass) before it is served.
//     [Client.SetWatchDelay] makes one client's watches deliver each
//     change that much later, as to a client further away: clients with
//     delays of their own see a change at distinct instants.
//   - Untracked fields: [Config.UntrackedFields] names resources whose
//     objects keep no managedFields, which spares every write of them the
//     field manager, most of a write's cost, for long simulations whose
//     clients never read them (the apiserver tracks every resource).
//
// Every knob is off in the zero Config, and a Server with none set
// behaves as the clientset of NewClientset always has. Reactors a test
// prepends on a client still run before the server, for what the knobs
// do not cover.
//
// # What it does not model
//
// Tests that need these use a real apiserver (internal/testenv in this
// repository): admission, validation and defaulting (beyond the
// metadata rules above: a pod keeps no defaulted terminationGracePeriod,
// phase or service account, and an invalid spec is accepted); the status
// subresource's separation (an update of the main resource may change
// status, as on client-go's fake); generation; create on update (the
// apiserver's Lease strategy allows a PUT to create a missing Lease;
// here an Update of a missing object answers 404);
// resourceVersionMatch=Exact (served as NotOlderThan); watch bookmarks,
// progress notifications and initial events (a watch from "" or "0"
// starts where the cache is and sends no synthetic ADDED events, where
// the apiserver first sends every object it holds); list pagination;
// DeleteCollection's changes (they reach neither the watch cache nor
// the watches); the field selectors of resources outside the core
// group, Jobs and CertificateSigningRequests beyond metadata.name and
// metadata.namespace (refused here with 400, where the apiserver may
// accept more); a field or label selector client-go cannot parse (its
// fake clientset panics); client-go's own retries (its REST client
// waits out a 429's or 5xx's Retry-After up to ten times before the
// caller sees it; here the caller sees it at once); the time an
// apiserver is down while it restarts ([Server.Restart] is instant; cut
// the clients to model it); the apiserver's watch cache sizing (its
// history grows while its oldest change is younger than 75s; here it is
// a fixed number and an optional window); a cache that lags in time
// rather than in changes; a request cancelled while it waits out its
// latency (reactors see no context); a partitioned request whose write
// reached the server (a cut refuses it whole; use AfterWrite for lost
// answers); a different request latency per client or verb; priority
// levels and fairness between clients; the apiserver's randomness (WatchLifetime
// is exact). Objects added through a Tracker directly get no
// resourceVersion and reach no watch. A watch's goroutine runs until
// the watch is stopped or ended. client-go's fake clientset records
// every request it serves (Actions), which a long run must clear
// (ClearActions) to bound its memory.
//
// The differential test (differential_test.go) runs seeded sequences of
// the operations above on this fake and on a real kube-apiserver and
// compares their answers; the seeds that once differed are kept, with
// the apiserver's transcripts, in testdata/differential.
package kubefake
