package prommetrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/reconkit/reconkit/checkpoint"
)

var checkpointPhases = []checkpoint.Phase{
	checkpoint.PhaseLocal, checkpoint.PhaseTrial, checkpoint.PhaseLastKnownGood, checkpoint.PhaseRolledBack,
}

// Checkpoint registers the checkpoint collectors on reg and returns the
// [checkpoint.Metrics] hook that feeds them, labelled name=name. Hooks for
// different names share the collectors; see the package documentation for
// the metrics.
func Checkpoint(reg prometheus.Registerer, name string) (checkpoint.Metrics, error) {
	r := newRegistrar(reg, name)
	m := &checkpointMetrics{
		name: name,
		phase: newPhaseGauge(r.gaugeVec("checkpoint", "phase",
			"1 for the configuration controller's current phase, 0 for the others.", "phase"), name, checkpointPhases),
		trials: r.counterVec("checkpoint", "trials_started_total",
			"Starts of a configuration trial (at assignment, and at each restart that resumes one)."),
		confirmed: r.counterVec("checkpoint", "confirmations_total",
			"Configurations that passed their trial or were confirmed, and became last-known-good."),
		rollbacks: r.counterVec("checkpoint", "rollbacks_total",
			"Assigned configurations rolled back, by the ConfigOK reason.", "reason"),
		trialTime: r.histogramVec("checkpoint", "trial_duration_seconds",
			"How long a trial ran before it ended, by outcome: confirmed or rolled_back (0 for a rollback decided at start-up).", trialBuckets, "outcome"),
		triesLeft: r.gaugeVec("checkpoint", "trial_tries_left",
			"Starts left to the configuration on trial before it is rolled back as a crash loop; 0 when none is on trial."),
	}
	if r.err != nil {
		return nil, r.err
	}
	m.phase.init()
	set(m.triesLeft, 0, name)
	return m, nil
}

type checkpointMetrics struct {
	name      string
	phase     *phaseGauge
	trials    *prometheus.CounterVec
	confirmed *prometheus.CounterVec
	rollbacks *prometheus.CounterVec
	trialTime *prometheus.HistogramVec
	triesLeft *prometheus.GaugeVec
}

func (m *checkpointMetrics) Observe(o checkpoint.Observation) {
	switch o.Event {
	case checkpoint.EventPhase:
		m.phase.set(string(o.Phase))
		if o.Phase != checkpoint.PhaseTrial {
			set(m.triesLeft, 0, m.name)
		}
	case checkpoint.EventTrialStarted:
		inc(m.trials, m.name)
		set(m.triesLeft, float64(o.TriesLeft), m.name)
	case checkpoint.EventConfirmed:
		inc(m.confirmed, m.name)
		observe(m.trialTime, o.TrialTime.Seconds(), m.name, "confirmed")
	case checkpoint.EventRolledBack:
		inc(m.rollbacks, m.name, o.Reason)
		observe(m.trialTime, o.TrialTime.Seconds(), m.name, "rolled_back")
	}
}
