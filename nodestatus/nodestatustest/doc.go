// Package nodestatustest provides a fake nodestatus.NodeProvider whose
// status and ping result a test sets.
//
// The fake is safe for concurrent use. It keeps every callback it was given
// and calls them synchronously from SetStatus and UpdateStatus, relying on
// the controller's promise that the callback never blocks. It does not
// check what it is given: a status the API server would reject is passed
// on as it is.
package nodestatustest
