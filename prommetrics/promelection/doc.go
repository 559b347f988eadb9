// Package promelection registers the Prometheus collectors of package
// election on a registry the host passes, never the global one, and returns
// the [election.Metrics] hook that feeds them.
//
// It imports election and no other package of reconkit, so a host that
// wants metrics for election alone compiles only this hook; the prommetrics
// package is the one-call aggregator over every such package. Every
// series carries a "name" label with the name the host gives the hook;
// hooks for different names share the collectors. [New] fails if the
// Registerer is nil, the name is not valid UTF-8 (an error wrapping
// prommetrics.ErrInvalidName), or the registry holds other collectors
// under the same metric names. The hook never blocks and never panics.
//
// # Metrics
//
// leader_election_master_status keeps the name controller-runtime gives it,
// so that existing dashboards and alerts apply.
//
//	leader_election_master_status{name}                 gauge: 1 while this candidate holds a term, else 0
//	reconkit_election_transitions_total{name,event}     counter: event=acquired|lost|resigned
//	reconkit_election_acquire_duration_seconds{name}    histogram: campaign start to acquisition
//	reconkit_election_handover_duration_seconds{name}   histogram: previous holder's end, as observed, to acquisition
//	reconkit_election_renew_failures_total{name}        counter: failed renewal attempts
//	reconkit_election_renew_duration_seconds{name,outcome}  histogram: renewal round trip, outcome=ok|failed
//	reconkit_election_renew_slack_seconds{name}         histogram: validity left by the holder's deadline when a renewal was sent
package promelection
