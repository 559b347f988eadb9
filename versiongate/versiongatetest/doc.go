// Package versiongatetest helps test code built on versiongate without a
// server: an in-memory Store that several gates share, each through its
// own Conn with knobs for adversity (a partition, lost keep-alives, write
// errors, held-back or compacted watches, record expiry on a fake clock);
// the store conformance suite every versiongate.Store passes
// (RunStoreConformance); and helpers that wait, on a deadline, for a
// gate's phase, leadership or view of the nodes.
//
// A gate on the in-memory store runs with any reconkit election, the
// in-memory election/electiontest one included: its terms are
// versiongate.Terms as they are, and the store fences them by their token.
// What the store does not model is listed on Store; those paths are tested
// on real etcd.
package versiongatetest
