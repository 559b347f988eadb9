// Package promlbrecon registers the Prometheus collectors of package
// lbrecon on a registry the host passes, never the global one, and returns
// the [lbrecon.Metrics] hook that feeds them.
//
// It imports lbrecon and no other package of reconkit, so a host that
// wants metrics for lbrecon alone compiles only this hook; the prommetrics
// package is the one-call aggregator over every such package. Every
// series carries a "name" label with the name the host gives the hook;
// hooks for different names share the collectors. [New] fails if the
// Registerer is nil, the name is not valid UTF-8 (an error wrapping
// prommetrics.ErrInvalidName), or the registry holds other collectors
// under the same metric names. The hook never blocks and never panics.
//
// # Metrics
//
//	reconkit_lbrecon_calls_total{name,verb,outcome}     counter: engine call attempts and reconciliations (verb=reconcile)
//	reconkit_lbrecon_call_duration_seconds{name,verb}   histogram
package promlbrecon
