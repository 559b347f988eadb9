// Package prommetrics turns the metrics hooks of reconkit's packages into
// Prometheus collectors registered on a registry the host passes, never
// the global one.
//
// [Agent] is the one call for an agent that uses every package: it
// registers every package's collectors on a prometheus.Registerer and
// returns one hook per package ([Hooks]), each to set as that package's
// Config.Metrics. [Election], [Versiongate], [Nodestatus], [Checkpoint]
// and [LBRecon] register one package's. Every series carries a "name"
// label with the name the host gives the hook, so several elections,
// gates, controllers or reconcilers share one registry; hooks for
// different names share the collectors. A constructor fails if the
// Registerer is nil, the name is not valid UTF-8, or the registry holds
// other collectors under the same metric names (the collectors registered
// before the clash stay registered). The hooks never block and never
// panic; they are safe for concurrent use, as the hooked packages'
// threading contracts require.
//
// # Import weight
//
// Importing this package compiles every package it hooks (etcd's client
// and client-go among them). A host that wants one package's metrics
// imports that package's hook alone, which compiles only the package it
// hooks: [github.com/reconkit/reconkit/prommetrics/promelection],
// [github.com/reconkit/reconkit/prommetrics/promversiongate],
// [github.com/reconkit/reconkit/prommetrics/promnodestatus],
// [github.com/reconkit/reconkit/prommetrics/promcheckpoint] and
// [github.com/reconkit/reconkit/prommetrics/promlbrecon], each with a
// New of the same signature as the function here. A test holds this
// with go list -deps.
//
// # Metrics
//
// Names follow Prometheus conventions (base units, _total for counters)
// under the namespace "reconkit", except leader_election_master_status,
// which keeps the name controller-runtime gives it so that existing
// dashboards and alerts apply. Durations are in seconds.
//
// Election:
//
//	leader_election_master_status{name}                 gauge: 1 while this candidate holds a term, else 0
//	reconkit_election_transitions_total{name,event}     counter: event=acquired|lost|resigned
//	reconkit_election_acquire_duration_seconds{name}    histogram: campaign start to acquisition
//	reconkit_election_handover_duration_seconds{name}   histogram: previous holder's end, as observed, to acquisition
//	reconkit_election_renew_failures_total{name}        counter: failed renewal attempts
//	reconkit_election_renew_duration_seconds{name,outcome}  histogram: renewal round trip, outcome=ok|failed
//	reconkit_election_renew_slack_seconds{name}         histogram: validity left by the holder's deadline when a renewal was sent
//
// Versiongate:
//
//	reconkit_versiongate_phase{name,phase}              gauge: 1 for the current phase, 0 for the others
//	reconkit_versiongate_blocking_nodes{name}           gauge: nodes keeping the gate from finishing
//	reconkit_versiongate_restricts_total{name}          counter: restricted statuses written as leader
//	reconkit_versiongate_done_total{name}               counter: done statuses written as leader
//	reconkit_versiongate_keepalive_age_seconds{name}    gauge: time since the record's last acknowledged keep-alive, computed at scrape on the hook's clock
//	reconkit_versiongate_keepalive_duration_seconds{name}  histogram: keep-alive round trip
//	reconkit_versiongate_record_lost_total{name}        counter: records lost or past their local deadline
//
// Nodestatus (pings are counted apart from API requests):
//
//	reconkit_nodestatus_requests_total{name,call,outcome,code}  counter: API requests, each retry counted; code is the HTTP status, 0 when no answer came
//	reconkit_nodestatus_request_duration_seconds{name,call}     histogram: call=update_lease is the heartbeat latency
//	reconkit_nodestatus_pings_total{name,outcome}               counter: calls of the provider's Ping
//	reconkit_nodestatus_ping_duration_seconds{name}             histogram
//
// Checkpoint:
//
//	reconkit_checkpoint_phase{name,phase}               gauge: 1 for the current phase (Local, Trial, LastKnownGood, RolledBack), 0 for the others
//	reconkit_checkpoint_trials_started_total{name}      counter: starts of a trial, restarts included
//	reconkit_checkpoint_confirmations_total{name}       counter: configurations that became last-known-good
//	reconkit_checkpoint_rollbacks_total{name,reason}    counter: rollbacks by ConfigOK reason (TrialProbeFailed, TrialCrashLoop, ...)
//	reconkit_checkpoint_trial_duration_seconds{name,outcome}  histogram: outcome=confirmed|rolled_back
//	reconkit_checkpoint_trial_tries_left{name}          gauge: starts left to the trial; 0 when none runs
//
// LBRecon:
//
//	reconkit_lbrecon_calls_total{name,verb,outcome}     counter: engine call attempts and reconciliations (verb=reconcile)
//	reconkit_lbrecon_call_duration_seconds{name,verb}   histogram
//
// Gauges and the phase series exist from the hook's creation (at 0), so
// an alert sees "not leading" or "not in phase done" before the first
// observation. Before the first acknowledged keep-alive, the keep-alive
// age counts from the hook's creation.
package prommetrics
