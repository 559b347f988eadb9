// Command election compares election's Kubernetes Lease backend with
// client-go's tools/leaderelection on a real kube-apiserver, and its etcd
// backend with etcd's concurrency.Election on that apiserver's etcd, with
// the same durations on both sides, in one run:
//
//   - graceful handover: the leader resigns (client-go: cancels its run
//     with ReleaseOnCancel) and the successor's lead starts;
//   - crash failover: the leader stops renewing without releasing, and a
//     follower takes over; the bound is LeaseDuration (TTL) + one round
//     trip;
//   - requests per second a follower sends while a leader holds;
//   - the partition-detection window: the leader's traffic is cut by a
//     proxy (no answers) and the time until the leader itself learns its
//     term ended is measured: our term context, client-go's
//     OnStartedLeading context, concurrency's Session.Done.
//
// It builds (once, cached) and starts its own etcd and kube-apiserver, so
// it needs no setup. At client-go's default durations it runs for about
// four and a half minutes, most of it client-go's handovers; the flags
// shorten it.
//
// Usage:
//
//	go run ./cmd/bench/election [-lease-duration 15s] [-renew-deadline 10s] [-retry-period 2s]
//	    [-ttl 10s] [-handovers 50] [-failovers 3] [-idle 20s]
package main
