// Package checkpointtest is a conformance suite for implementations of
// checkpoint.LKGStore.
//
// Run exercises the contract every store must keep: ID validation, payload
// round trips with hashes, immutability of saved checkpoints, the state
// record (round trip, copies, validation, references to missing
// checkpoints), cancelled contexts, and concurrent use. Check runs the same
// cases outside a test. They do not test what is specific to one
// implementation, such as durability across crashes or a history bound;
// those belong in the implementation's own tests.
//
// StrictFS is an in-memory file system for checkpoint.FSStore that keeps
// only what was made durable by fsync and simulates power loss, for tests
// that crash a store at every sync point.
package checkpointtest
