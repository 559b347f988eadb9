package promcheckpoint

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/reconkit/reconkit/checkpoint"
	"github.com/reconkit/reconkit/prommetrics/internal/promreg"
)

var checkpointPhases = []checkpoint.Phase{
	checkpoint.PhaseLocal, checkpoint.PhaseTrial, checkpoint.PhaseLastKnownGood, checkpoint.PhaseRolledBack,
}

// New registers the checkpoint collectors on reg and returns the
// [checkpoint.Metrics] hook that feeds them, labelled name=name. Hooks for
// different names share the collectors; see the package documentation for
// the metrics.
func New(reg prometheus.Registerer, name string) (checkpoint.Metrics, error) {
	r := promreg.New(reg, name)
	m := &checkpointMetrics{
		name: name,
		phase: promreg.NewPhaseGauge(r.GaugeVec("checkpoint", "phase",
			"1 for the configuration controller's current phase, 0 for the others.", "phase"), name, checkpointPhases),
		trials: r.CounterVec("checkpoint", "trials_started_total",
			"Starts of a configuration trial (at assignment, and at each restart that resumes one)."),
		confirmed: r.CounterVec("checkpoint", "confirmations_total",
			"Configurations that passed their trial or were confirmed, and became last-known-good."),
		rollbacks: r.CounterVec("checkpoint", "rollbacks_total",
			"Assigned configurations rolled back, by the ConfigOK reason.", "reason"),
		trialTime: r.HistogramVec("checkpoint", "trial_duration_seconds",
			"How long a trial ran before it ended, by outcome: confirmed or rolled_back (0 for a rollback decided at start-up).", promreg.TrialBuckets(), "outcome"),
		triesLeft: r.GaugeVec("checkpoint", "trial_tries_left",
			"Starts left to the configuration on trial before it is rolled back as a crash loop; 0 when none is on trial."),
	}
	if r.Err != nil {
		return nil, r.Err
	}
	m.phase.Init()
	promreg.Set(m.triesLeft, 0, name)
	return m, nil
}

type checkpointMetrics struct {
	name      string
	phase     *promreg.PhaseGauge
	trials    *prometheus.CounterVec
	confirmed *prometheus.CounterVec
	rollbacks *prometheus.CounterVec
	trialTime *prometheus.HistogramVec
	triesLeft *prometheus.GaugeVec
}

func (m *checkpointMetrics) Observe(o checkpoint.Observation) {
	switch o.Event {
	case checkpoint.EventPhase:
		m.phase.Set(string(o.Phase))
		if o.Phase != checkpoint.PhaseTrial {
			promreg.Set(m.triesLeft, 0, m.name)
		}
	case checkpoint.EventTrialStarted:
		promreg.Inc(m.trials, m.name)
		promreg.Set(m.triesLeft, float64(o.TriesLeft), m.name)
	case checkpoint.EventConfirmed:
		promreg.Inc(m.confirmed, m.name)
		promreg.Observe(m.trialTime, o.TrialTime.Seconds(), m.name, "confirmed")
	case checkpoint.EventRolledBack:
		promreg.Inc(m.rollbacks, m.name, o.Reason)
		promreg.Observe(m.trialTime, o.TrialTime.Seconds(), m.name, "rolled_back")
	}
}
