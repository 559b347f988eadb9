// Package promcheckpoint registers the Prometheus collectors of package
// checkpoint on a registry the host passes, never the global one, and returns
// the [checkpoint.Metrics] hook that feeds them.
//
// It imports checkpoint and no other package of reconkit, so a host that
// wants metrics for checkpoint alone compiles only this hook; the prommetrics
// package is the one-call aggregator over every such package. Every
// series carries a "name" label with the name the host gives the hook;
// hooks for different names share the collectors. [New] fails if the
// Registerer is nil, the name is not valid UTF-8 (an error wrapping
// prommetrics.ErrInvalidName), or the registry holds other collectors
// under the same metric names. The hook never blocks and never panics.
//
// # Metrics
//
//	reconkit_checkpoint_phase{name,phase}               gauge: 1 for the current phase (Local, Trial, LastKnownGood, RolledBack), 0 for the others
//	reconkit_checkpoint_trials_started_total{name}      counter: starts of a trial, restarts included
//	reconkit_checkpoint_confirmations_total{name}       counter: configurations that became last-known-good
//	reconkit_checkpoint_rollbacks_total{name,reason}    counter: rollbacks by ConfigOK reason (TrialProbeFailed, TrialCrashLoop, ...)
//	reconkit_checkpoint_trial_duration_seconds{name,outcome}  histogram: outcome=confirmed|rolled_back
//	reconkit_checkpoint_trial_tries_left{name}          gauge: starts left to the trial; 0 when none runs
package promcheckpoint
