// Package checkpoint keeps assigned configuration in crash-safe on-disk
// checkpoints, runs it on trial, and rolls back to the last-known-good
// configuration when it fails.
//
// # Pieces
//
// An [LKGStore] holds checkpoints (a payload with its SHA-256, source and
// creation time) and a small record naming the current checkpoint, the
// last-known-good one and when current was set (the trial start). [FSStore]
// keeps them in a directory; [MemStore] in memory, for tests. Both pass the
// conformance suite in package checkpointtest.
//
// A [Controller] is generic over the host's configuration type. [Controller.Bootstrap]
// picks the configuration to run at start-up: the assigned checkpoint if
// it loads, parses and validates, else the last-known-good one, else the
// host's local configuration; it never fails because of the store, only
// because the local configuration is invalid. [Controller.Assign] checkpoints
// a new payload, makes it current and starts its trial. [Controller.Run]
// checks the trial every CheckInterval: the configuration becomes
// last-known-good once the trial duration has passed and the optional health
// probe has passed at every check; a probe failure rolls back at once and
// records the rollback, so a restart does not retry the failed
// configuration. The trial start lives in the store, so a restart during a
// trial resumes it. The outcome is a ConfigOK corev1.NodeCondition whose
// reason names the failed step and whose message names the checkpoint.
//
// # Guarantees of FSStore
//
// Every file is written as a temporary file in the same directory, fsynced,
// renamed over its final name, and then the directory is fsynced. After a
// crash of the process (SIGKILL at any instant, tested hundreds of times)
// the store opens and holds either the state before or the state after the
// interrupted operation, never a mixture. After a power loss the same holds
// if the file system and disk honour fsync and rename is atomic, as on ext4,
// XFS and btrfs with their default options and a disk that does not lie
// about flushing its cache. Temporary files of an interrupted write are
// removed by Initialize.
//
// Every checkpoint file and the metadata record carry checksums verified
// on every read: truncation, bit flips, empty files (the failure behind
// kubernetes#52222) and missing files are reported as errors wrapping
// [ErrCorrupt] (or [ErrNotFound]), never as wrong data. Checkpoints are
// immutable: saving an ID again with other content fails with [ErrConflict].
// IDs are validated ([ValidateID]) so they cannot escape the directory.
// Directories are created 0700 and files 0600.
//
// # What it does not guarantee
//
// The store does not protect against two processes using one directory at
// once, against a file system that ignores fsync (some network and FUSE
// file systems, ext4 with nobarrier or data=writeback on a disk with a
// volatile cache), or against an administrator deleting the whole
// directory: a missing directory at Initialize is a first start. Pruning
// old generations does not fsync the directory, so a pruned file may
// reappear after a power loss; that is harmless history. A configuration
// that crashes the host before its trial ends is retried at every start,
// since the store keeps no count of boot attempts.
//
// # On-disk format, version 1
//
//	<Dir>/                      0700
//	  meta                      0600  the metadata record
//	  meta.corrupt                    a damaged record, kept when replaced
//	  checkpoints/              0700
//	    <gen>-<id>              0600  one checkpoint; gen is 16 hex digits
//	  .tmp-*, checkpoints/.tmp-*      temporary files, removed at Initialize
//
// The metadata record is three lines: "reconkit-checkpoint-meta v1", a JSON
// object {"current", "lastKnownGood", "currentSetAt" (Unix nanoseconds, 0
// when unset)}, and "sha256:" with the hex SHA-256 of the JSON line. A
// checkpoint file is the line "reconkit-checkpoint v1", a JSON header
// {"id", "generation", "size", "hash", "uid", "resourceVersion", "origin",
// "created"}, "sha256:" with the hex SHA-256 of the header line, then the
// payload: exactly size bytes whose SHA-256 is hash. Generations increase
// with every save; at most FSConfig.MaxGenerations checkpoints are kept, the
// oldest are pruned first, and the current and last-known-good ones never.
// A future version changes the first line.
package checkpoint
