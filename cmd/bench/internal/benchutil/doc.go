// Package benchutil holds what the benchmarks under cmd/bench share:
// percentiles and ratios of measurements, a wait that ends with its
// context, and counters of the requests a Kubernetes or etcd client sends.
package benchutil
