// Package electiontest provides an in-memory election.Elector that a test
// drives, and the conformance suite every election.Elector passes.
//
// Use the fake to test code built on election.Run or on Campaign without
// a server: create an Election, join Candidates, and elect, depose,
// partition or kill them from the test. Its limits are stated on Election;
// the main one is that time plays no part, so the overlap between an old
// leader that has not yet noticed its loss and its successor, which real
// backends allow for up to a session TTL or lease duration, never happens
// in the fake. Code whose safety depends on that overlap not existing must
// be fenced with the leadership's token or guard.
//
// Backends prove themselves with Run, which runs the same cases on the
// etcd backend, the Kubernetes Lease backend and the fake, including terms
// lost by expiry while the holder is cut off (Subject.Partition: a cut
// proxy for the real backends) and another candidate takes over. Overlap
// is judged from each holder's own view (its term context and ValidUntil)
// at the instant a successor's Campaign returns, never from a Leader
// request.
//
// WaitLeading, WaitNotLeading, WaitLeader and WaitTermEnded wait for a
// state on a context's deadline without polling, for tests that would
// otherwise loop on Leading or Leader.
package electiontest
