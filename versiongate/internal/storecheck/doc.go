// Package storecheck proves a versiongate.Store against the gate's needs,
// for tests only: it records every store operation (Recorder), checks the
// history for linearizability against a model of the store's observable
// semantics (Model, Check, with github.com/anishathalye/porcupine, which
// only this package and tests import), wraps stores with defects the
// checker must catch (IgnoreNodesRev, Stale) and with latency a correct
// store must survive (Lag), and drives real gates on any store: a rolling
// upgrade with crashes, partitions and server restarts (RunRolling) and
// joiners racing a leader's restrict (RunJoiners). A store plugs in
// through a Backend.
//
// # The model
//
// The state is what the linearized operations prove about the store: the
// status, the records not yet proven gone (value, lease, revision), the
// highest revision reported, and the fence. Each operation's outcome is
// judged as follows.
//
//   - Publish: OK needs a revision above every revision reported before,
//     and creates the record (replacing one with the same ID, which may
//     have expired unseen). Held needs a record with the ID.
//   - KeepAlive: OK needs the record bound to that lease. Lost removes it;
//     on a store whose expiry an observer carries out
//     (LostRecordsLinger: the Kubernetes store, whose keep-alive reports
//     the loss when the record's liveness lapses, and whose reaper deletes
//     the record later), Lost leaves the record, listable until a listing
//     omits it, but never kept alive again.
//   - Delete removes the record of that lease.
//   - List: its revision is at least every one reported before; every
//     listed record exists with that value and no newer revision; records
//     not listed are gone from then on (expired) and may not reappear.
//   - Read: the status is the last one written (or put back, below). Its
//     revision, one at which the value is current as the Store contract
//     says, is not necessarily the newest (the Kubernetes store reports
//     the status object's resourceVersion); the model does not check it.
//   - Fence and write of a term fenced by its token (every term on the
//     in-memory store, and on etcd a term without an etcd guard): a fence
//     succeeds exactly when no higher token fenced; a write exactly when
//     a fence at most its token is stored; each is refused otherwise.
//   - Fence and write of a guarded term (Input.Guarded; the etcd
//     election's terms on the etcd store): a refusal is always possible
//     (the candidate key may be gone unseen) and is final for that token;
//     success needs a token at least as high as every guarded token that
//     succeeded before. That assumes the election's own guarantee: a term
//     is granted only after every earlier term's guard stopped holding.
//   - A write conditioned on nodesRev succeeds only if every record known
//     to be newer than nodesRev is gone (it must have expired first);
//     ErrNodesChanged needs a record that is newer or of unknown revision
//     (unless a later term fenced meanwhile).
//
// # Writes validated after they are applied
//
// A store that cannot make a write conditional on the records (the
// Kubernetes store; ValidatedAfterWrite, Backend.ValidatedAfterWrite)
// applies a conditioned write, marked unvalidated with the status it
// replaced, then lists the records: it drops the mark if they pass, and
// puts the replaced status back if not (ErrNodesChanged); a later term's
// Fence puts back a status still marked. Readers see the write meanwhile.
// For such a store the model checks a conditioned write that did not
// succeed (refused, deposed, or unknown) as two halves over the same
// interval: an apply, which shows the value, marked, if the term holds
// (or does nothing), and an outcome, which puts the replaced status back
// if this write's value is still the newest (a refusal), and for an
// unknown outcome may also keep it, or leave it marked. A read between
// call and return may so see a write that was then refused; after the
// return it may not, unless the outcome is unknown, when the value may
// stay until it is validated or a later term fences. A Fence that raises
// the token puts back a marked status; a successful write drops the mark.
// On other stores such writes are atomic: a refused one is never seen.
//
// Ambiguity: an operation that returned an error other than the
// documented ones may or may not have taken effect, at any time after
// its call. Its outcome is Unknown and its return time Open: the checker
// may place it anywhere after its call, applied (if its conditions hold
// there) or not at all. A publish applied so has an unknown lease and
// revision. Reads and keep-alives that failed so are dropped: they change
// nothing the model tracks and show nothing. So are deletes: no operation
// needs a record gone. An open publish is pending from its call on, and
// takes effect, if at all, just before an operation that cannot be
// accepted without its record (a listing that shows it, a publish refused
// as held, a write refused for changed nodes); one that no later
// operation could need is dropped. Each of these keeps a linearization of
// every history the model accepts otherwise, and none accepts more
// (resolveOpen argues it).
//
// # The search
//
// Before porcupine searches, the intervals of the operations that report
// a revision are narrowed to the order the model imposes on them
// (publishes, listings and reads by revision; a record published once
// shown only before its delete), so that the search tries them in that
// order rather than backtracking over every ordering of the operations
// around them (TestManyConcurrentJoinersDecided, TestJoinersReadsDecided). No linearization the model accepts
// is lost. Open publishes are counted pending, not placed: an apiserver
// restart leaves dozens open, and the search tried each at every step
// after its call (TestOpenPublishesDecided). A history still undecided
// after CheckTimeout is kept as undecided-*.json beside the
// visualizations and searched again for RetryTimeout; still undecided
// then, it fails the test, since a check that could not look proves
// nothing (TestUndecidedHistoryFails).
//
// # What the model does not check
//
//   - Watches (WatchRecords, WatchStatus): not recorded. Their promises
//     (no missed change, revision order) are checked by the conformance
//     suite and, end to end, by the drivers' safety checks.
//   - Expiry timing: a record may expire at any moment; that it lives
//     while kept alive, and expires within its TTL otherwise, is not
//     checked here (the drivers check that nodes stop serving first).
//   - TTLs granted, lease identity beyond equality, and revision values
//     other than their order, the nodesRev condition, and that a
//     ReadStatus reports no revision below one reported before it.
//   - Anything done to the store outside recorded clients (an operator's
//     write, host-owned records): the model starts from an empty store,
//     and every client of the store under test must be recorded.
//   - A guarded term's write while its guard still held but the model
//     cannot know it: a refusal of a live term is accepted (it is a
//     liveness failure, not a safety one).
//   - Fairness or progress: a store that refuses everything is
//     linearizable. The drivers check that the upgrade completes.
package storecheck
