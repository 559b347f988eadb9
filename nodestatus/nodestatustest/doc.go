// Package nodestatustest provides a fake nodestatus.NodeProvider whose
// status and ping result a test sets, and helpers that wait, on the
// caller's deadline, for what tests otherwise poll for: WaitForNode and
// WaitForCondition watch a Node until a condition holds, and
// Provider.WaitForPings waits for the controller's pings.
//
// The fake is safe for concurrent use. It keeps every callback it was given
// and calls them synchronously from SetStatus and UpdateStatus, relying on
// the controller's promise that the callback never blocks. It does not
// check what it is given: a status the API server would reject (an invalid
// label, annotations over 256 KiB) is passed on as it is, which is how a
// test shows that the controller writes a reduced status instead of
// wedging.
//
// What it does not model: a ping either returns at once or hangs until its
// context ends (no latency in between); notifications come only when a
// test calls SetStatus or UpdateStatus.
package nodestatustest
