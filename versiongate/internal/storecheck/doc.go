// Package storecheck proves a versiongate.Store against the gate's needs,
// for tests only: it records every store operation (Recorder), checks the
// history for linearizability against a model of the store's observable
// semantics (Model, Check, with github.com/anishathalye/porcupine, which
// only this package and tests import), wraps stores with defects the
// checker must catch (IgnoreNodesRev, Stale, and the watch defects
// SkipWatchEvent, ReplayWatchEvent, FabricatedWatchStart, the deletion
// defects DropWatchDeletions, DelayWatchDeletions and
// FabricatedWatchDeletion, and the herd
// defect StatusOwnRevision) and with latency a correct store must
// survive (Lag), and drives real gates on any store: a rolling upgrade
// with crashes, partitions and server restarts (RunRolling) and joiners
// racing a leader's restrict (RunJoiners). The drivers also hold every
// node to a budget of store calls (CheckBudget). A store plugs in through
// a Backend.
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
//     have expired unseen). Held needs a record with the ID, or, on a
//     store that claims the ID before it makes the record
//     (LostRecordsLinger: the Kubernetes store's heartbeat Lease, judged
//     dead only after its TTL plus a margin), an earlier publish of the
//     ID, whatever its outcome: its claim may outlive the record, or a
//     publish cut before it made one (a node that crashed mid-publish is
//     refused as held when it starts again, while no listing shows its
//     record). The refused publish's own claim does not count.
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
//     The one exception is a record the store says it holds (a
//     HeldLister's Output.Held: the Kubernetes store lists a record it
//     saw deleted while the heartbeat the record named may still be
//     renewed, since its node may still serve): it must be the model's
//     record of that ID and value, or one the model removed, and it shows
//     no record of its ID at that revision. Unmarked, such a listing is a
//     stale read (TestHeldRecordListedAfterItsDeletion).
//   - Read: the status is the last one written (or put back, below), at
//     a revision not below any reported before it: the store's at the
//     read. (The Kubernetes store once reported the status Lease's own
//     resourceVersion, from which a watch after a restart got 410 at
//     every attempt: StatusOwnRevision, rejected.)
//   - Watches (KindWatch, KindRecordsEvent, KindStatusEvent,
//     KindWatchEnd). A watch starts from a revision some operation
//     reported before it (not a fabricated one). Each event is checked
//     like a read at a point between the call of the first operation that
//     reported the watch's start revision and the event's delivery: a
//     node acting on it acts on a state current at that point, and its
//     revision is not below any reported before that point. A records
//     batch comes after the watch's last position (never back), shows
//     created only the model's record of that ID and value, created after
//     that position and at most at the batch's revision (no replayed
//     event, no change that never happened), and shows every record the
//     model knows created in between (no skipped event). A deletion it
//     shows is applied: the record is gone from that point on, so one
//     reported before it happened, or after the record was created again,
//     is refused by the next operation that shows the record. And it
//     shows every deletion the model knows came after the watch's
//     position: a record the model removed before the batch (deleted,
//     expired, replaced) was deleted at or below the batch's revision and
//     above the one it was created at, so a batch that omits it while
//     that creation is at or after its position skipped the deletion, or
//     holds it back past a later change. A status event is after the watch's position and
//     shows the status current at its point. A watch that ends too old
//     (Backend.WatchTooOld: 410 Gone, a compacted revision) must have
//     started from a revision the history moved on from (KindMovedOn, which
//     RunRolling logs around each server restart), or, on a store whose
//     history is a window that moves on by itself (WatchWindow: the
//     apiserver's watch cache), from one outside the window the store
//     declares it keeps (DefaultWatchWindow, the apiserver's 75s): first
//     reported longer than that before the watch ended, or before a
//     restart that began before it ended plus that (the history after a
//     restart may start a little after the server serves again). A
//     server that answers 410 for a revision it still keeps is refused
//     (AnswerTooOld, TestWatchTooOldOnlyOutsideTheWindow).
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
// accepted without its record (a listing or a watch's batch that shows
// it, a publish refused as held, a write refused for changed nodes); one
// that no later
// operation could need is dropped. Each of these keeps a linearization of
// every history the model accepts otherwise, and none accepts more
// (resolveOpen argues it).
//
// # Serving below the minimum
//
// RunRolling asks every node whose release is below the upgrade's highest
// minimum compatible release whether it is ready, after every step, at
// every status event its watch delivers and while it waits for the
// rollout to complete, between a status read before the question (or the
// event) and one after it. A node ready while either shows a minimum above
// its release is a sighting; once the run ends each is judged against the
// recorded status writes (judgeSighting), and is a violation exactly when
// the status both reads show was put by a write that returned OK before
// the first read, and no other status write could have landed from that
// write's call until the second read returned: the node was ready while a
// status excluding it stood, validated. The reads alone cannot judge it.
// The status may change between a read and the question: it goes down
// when a 1.1.0 leader follows a 2.0.0 one (every node the restricted
// status admits is compatible with 1.1.0's state), and a node of 1.0.0
// then passes WaitReady; a watch delivers a status late. And on a store
// that validates a conditioned write after applying it (the Kubernetes
// store) a restricted status is seen from its update until the
// validating listing has it put back, while a node whose record the
// leader's summary missed serves on the status before it, as the store's
// contract allows: that node's record is what the listing finds. A check
// that judged the status read alone reported that as a violation
// (TestRollingCheckUnvalidatedWrite, TestRollingCheckStatusLoweredBeforeTheQuestion,
// TestJudgeSighting). A sighting around which the status changed, or
// whose write had not returned, proves nothing either way (a node that
// keeps serving is seen again by a later check); one that only a moment
// of serving would show can be missed so. Each sighting is logged with
// its verdict; a
// violation names the node's publishes and keep-alives and the listing
// the write was conditioned on.
//
// # Budgets
//
// The drivers count every call each node makes through the Recorder
// (Calls), failed ones included, and CheckBudget fails the test when a
// node makes more than Budget allows in any 10s: status reads, status
// watches, listings, record watches, and calls in all (DefaultBudget). A
// readiness wait that retries at a fixed pace, or reads and watches again
// and again from a revision the server no longer serves, goes far past
// it; the loops' budgets (BUDGETS.md) stay well within it. RunRolling
// keeps a gate waiting in WaitReady for the whole run (it needs a
// reconciler release no node has) whose calls fail at once while the
// server restarts, so the readiness loop meets a persistent answer that
// comes at once.
//
// # The search
//
// Before porcupine searches, the intervals of the operations that report
// a revision are narrowed to the order the model imposes on them
// (publishes, listings, reads and watch events by revision; a record published once
// shown only before its delete and before any watch batch that shows it
// deleted), each order narrowing the others until none narrows more, so
// that the search tries them in that order rather than backtracking over
// every ordering of the operations around them
// (TestManyConcurrentJoinersDecided, TestJoinersReadsDecided,
// TestKeepAlivesDecided). No linearization the model accepts is lost. Open publishes are counted pending, not placed: an apiserver
// restart leaves dozens open, and the search tried each at every step
// after its call (TestOpenPublishesDecided). Status events that show one
// status at one revision (each waiting node's watch delivers every
// change) are checked as one operation over the intersection of their
// intervals (mergeEvents argues why no correct history is lost, and
// merges records batches so too): a
// dozen at once, each placed on its own, left a rolling history of 800
// operations undecided after 70s. A refused tentative write's value that
// a read (or a status event) shows, where no other write of that value
// may have put it, places the write's apply before the read and its
// outcome after it (TestTentativeReadsDecided). A write of the same value
// refused before the read was called is no such other write: its refusal
// undid it, and an undone write's value stands again only if another
// write puts it back (refusedBefore argues it; a write of unknown outcome
// may have kept its value, and still counts). The leader's restricting
// write refused twice, the first counted as a write that might have shown
// the value, left the second's halves unplaced among 30 other open
// operations and a joiners history of 338 operations undecided for
// minutes; it is decided in 30ms now (TestRefusedTwiceDecided,
// TestRefusedWriteShowsUntilItReturns). A history whose revisions, so
// ordered, contradict its real-time order is illegal without a search
// (a short one only draws the visualization: TestJoinersOnStaleCacheFail
// was left undecided otherwise once watches were recorded). A history
// still undecided after CheckTimeout is kept as undecided-*.json beside the
// visualizations and searched again for RetryTimeout; still undecided
// then, it fails the test, since a check that could not look proves
// nothing (TestUndecidedHistoryFails).
//
// In a test binary built with the race detector, which slows the search
// several times over, a history of more than a few dozen operations is
// checked in a program built without it (the command verifyhistory); a
// TestMain that runs its tests through WithVerifier builds that program
// once for all of them instead of once per history.
//
// A call cut by its own context (a term's context, which ends with
// ErrLeadershipLost as its cause) is of unknown outcome whatever its
// error wraps: no later term need have fenced the store.
//
// # What the model does not check
//
//   - Watches, in part: a status watch may skip intermediate values (its
//     contract), so one that starts ahead of its revision is not caught;
//     that the newest status is never skipped is not checked; a
//     deletion carries no revision of its own, so a skipped one is caught
//     only for a record created at or after the watch's position (one
//     created before it may have been deleted before it too, and a
//     DeleteRecord answers OK for a record already expired), and a
//     deletion of a record of unknown revision is not applied; a batch at
//     its watch's own position is accepted, and a batch that omits a
//     deletion is accepted on a store whose watches report deletions late
//     (LostRecordsLinger: the Kubernetes store reports a deletion its
//     heartbeat confirms late, at the revision it has seen). There, a
//     batch that omits both the creation and the deletion of a record
//     gone before it is accepted too: the Kubernetes store's tracker,
//     shared by its listings and its watch, passes over a lagging watch's
//     events for a record its listings saw and then found gone, and the
//     model does not know which store a listing came from, so it cannot
//     tell that case from a watch that skipped both (TestModelWatchCases).
//     A too-old
//     end is judged by when the revision was first reported, on the
//     test's clock: the window is measured from the first report's call
//     (the earliest its next change could have come), so it may accept an
//     end the server answered a little early, never refuse one it could
//     give; and for a window's length after each restart, every too-old
//     end is accepted.
//   - Budgets: calls are counted at the Store, not on the wire: a store's
//     own retries inside a call (client-go retries a refused GET for up to
//     10s) and the election's and heartbeat's requests are not counted,
//     and time is the real clock's, so a budget is a bound on bursts, not
//     a measure of requests per second after 30s of one answer (the
//     packages' own tests measure those on fake clocks).
//   - Holds' lifetimes: a held record may be listed however long after
//     its deletion; that the store lets it go once the heartbeat is gone
//     or judged dead is the store's own tests' (kubestore's
//     TestHeldRecordListedAsHeld), and that the leader waits for it, the
//     drivers' and kubestore's hand-delete tests'.
//   - Claims' lifetimes: on a store that claims an ID before it makes
//     the record (LostRecordsLinger), any earlier publish of the ID may
//     hold it, however long ago: that its heartbeat is judged dead
//     within its TTL plus the margin is time, which the model does not
//     check. A store that refused such publishes for ever would be
//     caught by the drivers (the upgrade does not complete), not here.
//   - Expiry timing: a record may expire at any moment; that it lives
//     while kept alive, and expires within its TTL otherwise, is not
//     checked here (the drivers check that nodes stop serving first).
//   - TTLs granted, lease identity beyond equality, and revision values
//     other than their order and the nodesRev condition.
//   - Anything done to the store outside recorded clients (an operator's
//     write, host-owned records): the model starts from an empty store,
//     and every client of the store under test must be recorded.
//   - A guarded term's write while its guard still held but the model
//     cannot know it: a refusal of a live term is accepted (it is a
//     liveness failure, not a safety one).
//   - Fairness or progress: a store that refuses everything is
//     linearizable. The drivers check that the upgrade completes.
package storecheck
