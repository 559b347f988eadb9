// Package promversiongate registers the Prometheus collectors of package
// versiongate on a registry the host passes, never the global one, and returns
// the [versiongate.Metrics] hook that feeds them.
//
// It imports versiongate and no other package of reconkit, so a host that
// wants metrics for versiongate alone compiles only this hook; the prommetrics
// package is the one-call aggregator over every such package. Every
// series carries a "name" label with the name the host gives the hook;
// hooks for different names share the collectors. [New] fails if the
// Registerer is nil, the name is not valid UTF-8 (an error wrapping
// prommetrics.ErrInvalidName), or the registry holds other collectors
// under the same metric names. The hook never blocks and never panics.
//
// # Metrics
//
//	reconkit_versiongate_phase{name,phase}              gauge: 1 for the current phase, 0 for the others
//	reconkit_versiongate_blocking_nodes{name}           gauge: nodes keeping the gate from finishing
//	reconkit_versiongate_restricts_total{name}          counter: restricted statuses written as leader
//	reconkit_versiongate_done_total{name}               counter: done statuses written as leader
//	reconkit_versiongate_keepalive_age_seconds{name}    gauge: time since the record's last acknowledged keep-alive, computed at scrape on the hook's clock
//	reconkit_versiongate_keepalive_duration_seconds{name}  histogram: keep-alive round trip
//	reconkit_versiongate_record_lost_total{name}        counter: records lost or past their local deadline
package promversiongate
