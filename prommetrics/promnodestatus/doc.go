// Package promnodestatus registers the Prometheus collectors of package
// nodestatus on a registry the host passes, never the global one, and returns
// the [nodestatus.Metrics] hook that feeds them.
//
// It imports nodestatus and no other package of reconkit, so a host that
// wants metrics for nodestatus alone compiles only this hook; the prommetrics
// package is the one-call aggregator over every such package. Every
// series carries a "name" label with the name the host gives the hook;
// hooks for different names share the collectors. [New] fails if the
// Registerer is nil, the name is not valid UTF-8 (an error wrapping
// prommetrics.ErrInvalidName), or the registry holds other collectors
// under the same metric names. The hook never blocks and never panics.
//
// # Metrics
//
// Pings are counted apart from API requests.
//
//	reconkit_nodestatus_requests_total{name,call,outcome,code}  counter: API requests, each retry counted; code is the HTTP status, 0 when no answer came
//	reconkit_nodestatus_request_duration_seconds{name,call}     histogram: call=update_lease is the heartbeat latency
//	reconkit_nodestatus_pings_total{name,outcome}               counter: calls of the provider's Ping
//	reconkit_nodestatus_ping_duration_seconds{name}             histogram
package promnodestatus
