// Command lbrecon compares lbrecon's load-balancer reconciliation with a
// re-implementation of the original algorithm it replaces (seed.go), side by
// side in one run, on two engine models:
//
//   - kind: the plain in-memory engine (latency, pending period);
//   - lagging: the same plus list lag and asynchronous deletion;
//   - realistic: lagging plus a 429 (Retry-After 1 s) on every k-th call;
//   - failing: lagging plus one create in -fail-every failing transiently
//     (nothing created; the reconciler cannot know);
//   - lagging/replace and failing/replace: lagging and failing on an
//     engine that cannot update in place (no lbrecon.Updater), so that a
//     node-port change replaces the servers (make-before-break) and meets
//     the failing creates;
//   - lagging/listings and failing/listings: lagging and failing with a
//     list lag of -lag-listings listings instead of a time (an object
//     created is left out of that many List calls).
//
// lbrecon runs three times, always with its default configuration
// (Config{Engine, Tag}), on three kinds of provider:
//
//   - lbrecon: the engine declares its list lag (lbrecon.ListLagger, or
//     lbrecon.ListingLagger for a lag in listings), so a failed creation's
//     name is held until one listing made that long (or that many
//     listings) after the call, not ConfirmTimeout;
//   - lbrecon+token: the engine declares no lag but takes idempotency
//     tokens (lbrecon.IdempotentCreator), so a failed creation is sent
//     again with its token at once;
//   - lbrecon-nolag: the engine does neither; a failed creation holds its
//     name for ConfirmTimeout (2 min), the only safe bound left.
//
// In every model a List costs 1 + N provider requests (a tag search
// followed by one GET per object found), every other call 1.
//
// Scenarios: converge ports × addresses × targets from empty, replace one
// server (a target renamed), change one port's node port, tear down. For
// each: engine calls, provider requests, simulated wall time, duplicates
// created (creations of a kind, name and spec already created in the
// scenario), and the fewest servers a backend held during a change.
//
// Calls count every engine call attempt, whatever its verb (List and Get
// included) and whatever its answer (a 429 included). The minimum a
// scenario is compared with is one definition for both algorithms: one List
// to plan, one call per object created, updated or destroyed, and one
// observation per wave of writes that must be seen before the next step may
// go on (make-before-break: the new servers in service before the old ones
// go; references: children gone before their parents) or before success
// may be reported (the last wave). It counts no 429.
//
// Each algorithm runs as a host would run it: called again after an error
// (one second later), up to 100 calls per scenario.
//
// Everything runs inside a testing/synctest bubble, where time only passes
// while every goroutine is blocked: engine latency, pending periods, lags
// and backoff waits take no real time, and concurrent calls overlap exactly
// as they would against a real provider. "Wall" is that simulated time: the
// time a host would wait, dominated by waits on the clock (pending periods,
// lags, polls, holds); the CPU time of the reconciler is not in it. That is
// why this program imports testing.
//
// Usage:
//
//	go run ./cmd/bench/lbrecon [-latency 20ms] [-pending 1s] [-lag 3s] [-lag-listings 1] [-delete 2s] [-throttle 40] [-fail-every 7] [-ports 4] [-addrs 2] [-targets 50]
package main
