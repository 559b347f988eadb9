// Command restart measures what a fleet of agents sends a real
// kube-apiserver when it restarts: reconkit's loops (a nodestatus
// NodeController and a configmapsource watch per agent) side by side with
// a kubelet-style reference (the kubelet's lease controller and node
// status loop, re-implemented with their constants, and client-go
// reflectors for the agent's Node and ConfigMap), in the same run, against
// the same apiserver (internal/servers builds and starts it, with its
// etcd).
//
// Each agent has a client of its own (its own connection, as separate
// processes have), wrapped in a transport that records every request. The
// program lets every agent settle, measures a steady-state window, then
// restarts the apiserver (SIGTERM, start again on the same port and
// storage) and reports, for each side, requests per agent per second
// while it was down and over the first minute after it was ready, the
// busiest second, and the requests by kind; then the ratios.
//
// The kubelet-style reference, from kubelet v1.37.1 and client-go
// v0.37.1:
//
//   - lease (component-helpers/apimachinery/lease): renew every 10 s with
//     4% jitter; a renewal tries up to 5 updates at once; after they fail,
//     ensure the lease exists with GETs whose waits start at 200 ms and
//     double to 7 s, then update it;
//   - node status (pkg/kubelet/kubelet_node_status.go): every 10 s, up to 5
//     tries, the first from the informer's cache and the others from a
//     GET; a PATCH only when the status changed or every 5 minutes;
//   - reflectors (client-go tools/cache): list, then watch from the list's
//     resourceVersion; waits between failed attempts from 800 ms doubling
//     to 30 s with full jitter; a 410 lists again.
//
// With -mode fake it measures instead, in a testing/synctest bubble on
// kubefake, loops of other packages under each persistent answer (as
// requests per second from 30 s to 90 s): the figures BUDGETS.md gives
// for loops not yet held by a test in their package. That is why this
// program imports testing.
//
// Usage:
//
//	go run ./cmd/bench/restart [-agents 50] [-settle 40s] [-steady 30s] [-after 60s]
//	go run ./cmd/bench/restart -mode fake
package main
