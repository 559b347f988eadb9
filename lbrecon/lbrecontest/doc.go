// Package lbrecontest provides an in-memory [lbrecon.Engine] for tests and
// simulations: every call takes a fixed latency on an injected clock, created
// objects stay pending for a while, faults can be injected, and calls are
// counted by verb.
//
// # Limits
//
// The engine is a test double, not a model of any particular provider:
//
//   - List returns every object carrying the queried tag plus every untagged
//     object, whatever the scope (a real engine narrows untagged objects to
//     the scope). There is no pagination: one List is one call.
//   - There is no referential integrity: destroying a backend leaves its
//     servers in place, and a spec referring to a missing ID is accepted.
//   - Names are not unique: creating an object twice creates two objects.
//   - Latency is the same for every call and does not grow with the size of
//     an answer; calls never overlap in their effects (one mutex), although
//     their latencies do.
//   - State changes only at creation, repair and through the fault hooks;
//     there is no drift other than what a test does with Put and Delete.
package lbrecontest
