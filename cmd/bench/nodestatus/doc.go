// Command nodestatus measures nodestatus' NodeController against a
// re-implementation of the original virtual-kubelet node controller
// (seed.go), both talking to the same counting in-memory API server
// (fakeapi.go) through client-go.
//
// Two measurements:
//
//   - requests: steady-state API requests per node per minute, by verb, with
//     default settings, over simulated time. Both controllers run inside a
//     testing/synctest bubble, where time.Now, timers and sleeps are virtual
//     (the NodeController's nil Clock is the time package), so an hour takes
//     a fraction of a second and the counts are exact. That is why this
//     program imports testing.
//   - scale: many NodeControllers in one process sharing one client, in real
//     time: memory and goroutines per node, CPU per heartbeat, and whether
//     every lease is renewed on time.
//   - scale-real: the same on a real kube-apiserver and etcd built and
//     started for the run (internal/servers), with their CPU and memory,
//     and requests per node per minute as the client sent them.
//
// Memory per node is the growth of the heap in use (every span that holds a
// live object, so fragmentation counts) plus goroutine stacks, each read
// after two garbage collections, from before the controllers are built
// (what New allocates is included, and shown on its own line) to the end of
// the warm-up, divided by the number of nodes. It includes the shared
// client-go client and its connection, and in scale-real the harness's
// buffer of the servers' logs; in scale the fake server's store is
// subtracted.
//
// In both scale modes the controllers share one Config.Limiter,
// semaphore.NewWeighted(32), as a process that starts many nodes together
// should (see nodestatus.Limiter); -limit 0 measures them without, each
// registering the moment it starts.
//
// Usage:
//
//	go run ./cmd/bench/nodestatus -mode requests [-nodes 10] [-minutes 60]
//	go run ./cmd/bench/nodestatus -mode scale [-nodes 10000] [-warmup 30s] [-window 2m] [-limit 32]
//	go run ./cmd/bench/nodestatus -mode scale-real [-nodes 1000] [-warmup 30s] [-window 2m] [-limit 32]
package main
