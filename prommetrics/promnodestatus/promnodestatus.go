package promnodestatus

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/reconkit/reconkit/nodestatus"
	"github.com/reconkit/reconkit/prommetrics/internal/promreg"
)

// New registers the node-status collectors on reg and returns the
// [nodestatus.Metrics] hook that feeds them, labelled name=name (the
// node's name, say). Hooks for different names share the collectors; see
// the package documentation for the metrics.
func New(reg prometheus.Registerer, name string) (nodestatus.Metrics, error) {
	r := promreg.New(reg, name)
	m := &nodestatusMetrics{
		name: name,
		requests: r.CounterVec("nodestatus", "requests_total",
			"API requests of the node controller (each retry counts), by call, outcome and HTTP status code (0 when no answer came).",
			"call", "outcome", "code"),
		latency: r.HistogramVec("nodestatus", "request_duration_seconds",
			"Duration of each API request by call; call=update_lease is the heartbeat latency.", promreg.RequestBuckets(), "call"),
		pings: r.CounterVec("nodestatus", "pings_total",
			"Calls of the provider's Ping, by outcome.", "outcome"),
		pingLatency: r.HistogramVec("nodestatus", "ping_duration_seconds",
			"Duration of each call of the provider's Ping.", promreg.RequestBuckets()),
	}
	if r.Err != nil {
		return nil, r.Err
	}
	return m, nil
}

type nodestatusMetrics struct {
	name        string
	requests    *prometheus.CounterVec
	latency     *prometheus.HistogramVec
	pings       *prometheus.CounterVec
	pingLatency *prometheus.HistogramVec
}

func (m *nodestatusMetrics) Observe(o nodestatus.Observation) {
	if o.Call == nodestatus.CallPing {
		promreg.Inc(m.pings, m.name, string(o.Outcome))
		promreg.Observe(m.pingLatency, o.Latency.Seconds(), m.name)
		return
	}
	promreg.Inc(m.requests, m.name, string(o.Call), string(o.Outcome), strconv.Itoa(o.Code))
	promreg.Observe(m.latency, o.Latency.Seconds(), m.name, string(o.Call))
}
