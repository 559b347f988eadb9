package promlbrecon

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/reconkit/reconkit/lbrecon"
	"github.com/reconkit/reconkit/prommetrics/internal/promreg"
)

// New registers the load-balancer reconciler collectors on reg and
// returns the [lbrecon.Metrics] hook that feeds them, labelled name=name.
// Hooks for different names share the collectors; see the package
// documentation for the metrics.
func New(reg prometheus.Registerer, name string) (lbrecon.Metrics, error) {
	r := promreg.New(reg, name)
	m := &lbreconMetrics{
		name: name,
		calls: r.CounterVec("lbrecon", "calls_total",
			"Engine call attempts (each retry counts) and whole reconciliations (verb=reconcile), by verb and outcome.", "verb", "outcome"),
		durations: r.HistogramVec("lbrecon", "call_duration_seconds",
			"Duration of engine call attempts and whole reconciliations, by verb.", promreg.RequestBuckets(), "verb"),
	}
	if r.Err != nil {
		return nil, r.Err
	}
	return m, nil
}

type lbreconMetrics struct {
	name      string
	calls     *prometheus.CounterVec
	durations *prometheus.HistogramVec
}

func (m *lbreconMetrics) Observe(verb lbrecon.Verb, outcome lbrecon.Outcome, d time.Duration) {
	promreg.Inc(m.calls, m.name, string(verb), string(outcome))
	promreg.Observe(m.durations, d.Seconds(), m.name, string(verb))
}
