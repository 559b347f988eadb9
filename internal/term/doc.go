// Package term holds the machinery the election backends share for their
// terms: the [Core] every backend's Leadership is built on, the cached
// leader flag, and the reporter that sends observations and events to a
// configuration's hooks.
//
// A term is one span of leadership of one candidate, with one fencing
// token: what election.Leadership stands for. A Core is the part of a
// term that does not depend on the backend: its context and cancel cause,
// token, identity and release hook. Each backend's Leadership holds its
// Core in a field named core.
// It imports only the core election package, so neither backend pulls in
// the other's client.
package term
