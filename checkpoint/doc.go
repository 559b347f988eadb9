// Package checkpoint keeps assigned configuration in crash-safe on-disk
// checkpoints, runs it on trial, and rolls back to the last-known-good
// configuration when it fails.
//
// # Pieces
//
// An [LKGStore] holds checkpoints (a payload with its SHA-256, source and
// creation time) and a [State] record modelled on the kubelet's
// NodeConfigStatus: the assigned checkpoint, the active one, the
// last-known-good one, the starts of its trial left, the assigned
// configuration's error and the payload hashes rejected before. [FSStore]
// keeps them in a directory, through a small [FS] interface ([OSFS] by
// default); [MemStore] in memory, for tests. Both pass the conformance
// suite in package checkpointtest, which also provides StrictFS, an
// in-memory FS that simulates power loss.
//
// A [Controller] is generic over the host's configuration type.
// [Controller.Bootstrap] picks the configuration to run at start-up: the
// assigned checkpoint if it loads, parses and validates and was not rolled
// back before, else the last-known-good one, else the host's local
// configuration; it never fails because of the store, only because the
// local configuration is invalid. [Controller.Assign] checkpoints a new
// payload, records it as assigned and starts its trial. [Controller.Run]
// checks the trial every CheckInterval: the configuration becomes
// last-known-good once the health probe has passed at every check for
// TrialDuration; a probe failure rolls back at once. [Controller.Confirm]
// and [Controller.Rollback] end a trial by hand. The outcome is a ConfigOK
// [Condition] (shaped as a Kubernetes NodeCondition, without Kubernetes
// types) whose reason names the failed step and whose message names the
// checkpoint. [Controller.Run] returns nil when its context ends and an
// error only for a real failure (a source that cannot go on).
//
// The package and its Controller compile without client-go, k8s.io/api and
// k8s.io/apimachinery; the Kubernetes ConfigMap source lives in package
// configmapsource.
//
// # Reporting
//
// All optional, nil meaning none, each called synchronously with the
// controller's lock held, so each must return at once:
//
//   - Config.Conditions receives the ConfigOK condition at Bootstrap and at
//     every change of its status, reason or message, never twice in a row
//     the same. An ID a source cannot supply (an invalid UID) is reported
//     there with [ReasonSourceInvalid] and the error, not only logged.
//   - Config.Metrics receives [Observation]s: [EventPhase] at Bootstrap and
//     at every phase change; [EventTrialStarted] with TriesLeft at every
//     start of a trial (Assign, and each Bootstrap that resumes one);
//     [EventConfirmed] with TrialTime when a trial passes or is confirmed;
//     [EventRolledBack] with Reason and TrialTime when this process rolls
//     an assigned configuration back (TrialTime is 0 when the decision is
//     made at Bootstrap: a crash loop, a checkpoint that does not load,
//     parse or validate, a trial start that cannot be recorded). A restart
//     that finds a rollback already recorded reports the phase only, so a
//     rollback is counted once.
//   - Config.Events receives a Normal [EventReasonTrialStarted] and
//     [EventReasonConfirmed] event and a Warning [EventReasonRolledBack]
//     event at the same moments, with the condition's message (the
//     rollback's prefixed by its reason).
//
// # Guarantees of the Controller
//
//   - A rollback survives restarts. Its reason is persisted with the
//     rejected payload's hash; after a restart Bootstrap runs
//     last-known-good (or local) and reports the same reason, and Assign
//     refuses the same payload under any checkpoint ID ([ErrRejected]).
//     Assigning the last-known-good payload again clears the error at once.
//   - Downtime and clock jumps cannot graduate a configuration. The trial
//     is timed on the monotonic clock of the process running it, from when
//     that process started it; a restart starts it again. The wall-clock
//     times in the record are for people only.
//   - A crash loop ends. Each start of a trial (Assign, and each Bootstrap
//     that resumes it) persists one fewer start left before the trial
//     begins; a configuration that has not graduated within MaxTrialStarts
//     starts is rolled back with [ReasonCrashLoop]. If the start cannot be
//     recorded, the trial does not start.
//   - Only a configuration that passed its trial in one process, or was
//     confirmed, becomes last-known-good; the record naming it is written
//     before the status says so.
//   - The newest assignment wins. A delivery of the Source that fails on
//     the store is retried with backoff without holding up the Source;
//     the retry stops, and is never applied, once a newer delivery or a
//     call of Assign came, and the newer one is tried at once. While it
//     fails the condition says so ([ReasonSaveFailed]).
//
// # Guarantees of FSStore
//
// Every file is written as a temporary file in the same directory, fsynced,
// renamed over its final name, and then the directory is fsynced; a new
// directory is made durable by fsyncing its parent. After a crash of the
// process (SIGKILL at any instant) or a power loss, the store opens and
// holds either the state before or the state after the interrupted
// operation, never a mixture, and an operation that returned nil is never
// lost. Power loss is proven on checkpointtest.StrictFS by crashing at
// every sync point of Save, SetState and pruning; on a real disk it holds
// if the file system and disk honour fsync and rename is atomic, as on
// ext4, XFS and btrfs with their default options and a disk that does not
// lie about flushing its cache.
//
// The state record is kept twice, in two files written one after the
// other, each with a generation number; the intact copy with the higher
// generation wins and the other is rewritten. No single damaged copy (bit
// flip, truncation, zero length, deletion, a directory in its place)
// loses the last-known-good configuration. Every checkpoint file and both
// copies carry checksums verified on every read: damage is reported as an
// error wrapping [ErrCorrupt] (or [ErrNotFound]), never as wrong data
// (kubernetes#52222 was an empty file taken for a valid one). Checkpoints
// are immutable: saving an ID again with other content fails with
// [ErrConflict]. IDs are validated ([ValidateID]) so they cannot escape the
// directory. Directories are created 0700 and files 0600.
//
// Initialize takes an exclusive flock(2) on <Dir>/lock, held until Close:
// a second FSStore on the directory, in this process or another (a
// DaemonSet rolling update with surge), fails with [ErrLocked] and touches
// nothing. Temporary entries (.tmp-*, of any shape: a directory is
// emptied first, a symbolic link removed, never followed) are removed only
// by the lock holder, at Initialize, when their writer is provably gone.
//
// What the store could not have left is reported as corruption, never as
// a failed Initialize while the state record is intact: a checkpoints
// directory replaced by a file (or anything but a directory) is kept as
// checkpoints.corrupt and a new directory is made, the state record
// still opens, and every checkpoint it names fails to load with an error
// wrapping [ErrCorrupt] and [ErrNotFound] that says why; the Controller
// then forgets a last-known-good checkpoint that is gone, so that a new
// assignment can be recorded. Only damage that cannot be repaired safely
// fails Initialize, with an error wrapping [ErrCorrupt] naming it: a lock
// that is not a regular file (removing it could let two stores hold the
// directory) and a store directory that is not a directory.
//
// If a directory fsync fails after a rename, the store's memory follows the
// disk (the renamed file is in place) and the operation returns the error;
// the next write fsyncs the directory again before anything else, so
// retrying the operation makes it durable.
//
// # What it does not guarantee
//
// The store does not protect against a file system that ignores fsync
// (some network and FUSE file systems, ext4 with nobarrier or
// data=writeback on a disk with a volatile cache), against damage to both
// copies of the state record at once (the store then reports
// [ErrCorrupt] and the Controller runs the local configuration until a
// new assignment rewrites the record), or against an administrator
// deleting the whole directory: a missing directory at Initialize is a
// first start. Locking needs flock(2) (Unix); elsewhere Initialize fails.
// A payload that fails only in ways the probe cannot see is not detected.
//
// # On-disk format
//
//	<Dir>/                      0700
//	  lock                      0600  flock(2) target, empty
//	  state-a, state-b          0600  the two copies of the state record
//	  state-?.corrupt                 a damaged copy, kept when replaced
//	  checkpoints/              0700
//	    <gen>-<id>              0600  one checkpoint; gen is 16 hex digits
//	  .tmp-*, checkpoints/.tmp-*      temporary files, removed at Initialize
//	  checkpoints.corrupt             what stood in place of checkpoints/
//
// A state copy is three lines: "reconkit-checkpoint-state v2", a JSON
// object {"generation", "assigned", "assignedHash", "assignedAt" (Unix
// nanoseconds), "active", "lastKnownGood", "lastKnownGoodHash",
// "triesLeft", "error", "rejected"} where error and the elements of
// rejected are {"hash", "id", "reason", "message", "at"}, and "sha256:"
// with the hex SHA-256 of the JSON line. A checkpoint file is the line
// "reconkit-checkpoint v1", a JSON header {"id", "generation", "size",
// "hash", "uid", "resourceVersion", "origin", "created"}, "sha256:" with
// the hex SHA-256 of the header line, then the payload: exactly size bytes
// whose SHA-256 is hash. Generations increase with every save; at most
// FSConfig.MaxGenerations checkpoints are kept, the oldest are pruned
// first, and those the state record refers to never. A future version
// changes the first line. A store written by version 1 (one "meta" record
// naming current and last-known-good) is upgraded by Initialize: both are
// kept, a checkpoint that was on trial gets one more start, and "meta"
// stays unused.
package checkpoint
