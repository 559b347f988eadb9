// Package checkpointtest is a conformance suite for implementations of
// checkpoint.LKGStore.
//
// Run exercises the contract every store must keep: ID validation, payload
// round trips with hashes, immutability of saved checkpoints, references
// to missing checkpoints, current, last-known-good and trial start, Reset,
// cancelled contexts, and concurrent use. It does not test what is specific
// to one implementation, such as durability across crashes or a history
// bound; those belong in the implementation's own tests.
package checkpointtest
