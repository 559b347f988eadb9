package prommetrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/reconkit/reconkit/lbrecon"
)

// LBRecon registers the load-balancer reconciler collectors on reg and
// returns the [lbrecon.Metrics] hook that feeds them, labelled name=name.
// Hooks for different names share the collectors; see the package
// documentation for the metrics.
func LBRecon(reg prometheus.Registerer, name string) (lbrecon.Metrics, error) {
	r := newRegistrar(reg, name)
	m := &lbreconMetrics{
		name: name,
		calls: r.counterVec("lbrecon", "calls_total",
			"Engine call attempts (each retry counts) and whole reconciliations (verb=reconcile), by verb and outcome.", "verb", "outcome"),
		durations: r.histogramVec("lbrecon", "call_duration_seconds",
			"Duration of engine call attempts and whole reconciliations, by verb.", requestBuckets, "verb"),
	}
	if r.err != nil {
		return nil, r.err
	}
	return m, nil
}

type lbreconMetrics struct {
	name      string
	calls     *prometheus.CounterVec
	durations *prometheus.HistogramVec
}

func (m *lbreconMetrics) Observe(verb lbrecon.Verb, outcome lbrecon.Outcome, d time.Duration) {
	inc(m.calls, m.name, string(verb), string(outcome))
	observe(m.durations, d.Seconds(), m.name, string(verb))
}
