package prommetrics

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/reconkit/reconkit/nodestatus"
)

// Nodestatus registers the node-status collectors on reg and returns the
// [nodestatus.Metrics] hook that feeds them, labelled name=name (the
// node's name, say). Hooks for different names share the collectors; see
// the package documentation for the metrics.
func Nodestatus(reg prometheus.Registerer, name string) (nodestatus.Metrics, error) {
	r := newRegistrar(reg, name)
	m := &nodestatusMetrics{
		name: name,
		requests: r.counterVec("nodestatus", "requests_total",
			"API requests of the node controller (each retry counts), by call, outcome and HTTP status code (0 when no answer came).",
			"call", "outcome", "code"),
		latency: r.histogramVec("nodestatus", "request_duration_seconds",
			"Duration of each API request by call; call=update_lease is the heartbeat latency.", requestBuckets, "call"),
		pings: r.counterVec("nodestatus", "pings_total",
			"Calls of the provider's Ping, by outcome.", "outcome"),
		pingLatency: r.histogramVec("nodestatus", "ping_duration_seconds",
			"Duration of each call of the provider's Ping.", requestBuckets),
	}
	if r.err != nil {
		return nil, r.err
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
		inc(m.pings, m.name, string(o.Outcome))
		observe(m.pingLatency, o.Latency.Seconds(), m.name)
		return
	}
	inc(m.requests, m.name, string(o.Call), string(o.Outcome), strconv.Itoa(o.Code))
	observe(m.latency, o.Latency.Seconds(), m.name, string(o.Call))
}
