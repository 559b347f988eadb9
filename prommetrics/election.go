package prommetrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/reconkit/reconkit/election"
)

// Election registers the election collectors on reg and returns the
// [election.Metrics] hook that feeds them, labelled name=name. Hooks for
// different names share the collectors; see the package documentation for
// the metrics. It fails if reg is nil, name is not valid UTF-8, or reg
// holds other collectors under the same metric names.
func Election(reg prometheus.Registerer, name string) (election.Metrics, error) {
	r := newRegistrar(reg, name)
	m := &electionMetrics{
		name: name,
		status: register(r, prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "leader_election_master_status",
			Help: "Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 indicates master. 'name' is the string used to identify the lease.",
		}, []string{LabelName})),
		transitions: r.counterVec("election", "transitions_total",
			"Changes of leadership of this candidate, by event: acquired, lost (the term ended without Resign) or resigned.", "event"),
		acquire: r.histogramVec("election", "acquire_duration_seconds",
			"Time from the start of a campaign to the acquisition of a term.", waitBuckets),
		handover: r.histogramVec("election", "handover_duration_seconds",
			"Time from the end of the previous holder's term, as this candidate observed it, to this candidate's acquisition; not observed when there was no previous holder.", waitBuckets),
		renewFailures: r.counterVec("election", "renew_failures_total",
			"Failed attempts to renew the term."),
		renewLatency: r.histogramVec("election", "renew_duration_seconds",
			"Round trip of each renewal attempt, by outcome: ok or failed.", requestBuckets, "outcome"),
		slack: r.histogramVec("election", "renew_slack_seconds",
			"How long the term was still valid, by its holder's own deadline, when each renewal was sent.", slackBuckets),
	}
	if r.err != nil {
		return nil, r.err
	}
	set(m.status, 0, name)
	return m, nil
}

type electionMetrics struct {
	name          string
	status        *prometheus.GaugeVec
	transitions   *prometheus.CounterVec
	acquire       *prometheus.HistogramVec
	handover      *prometheus.HistogramVec
	renewFailures *prometheus.CounterVec
	renewLatency  *prometheus.HistogramVec
	slack         *prometheus.HistogramVec
}

func (m *electionMetrics) Observe(o election.Observation) {
	switch o.Event {
	case election.EventAcquired:
		set(m.status, 1, m.name)
		inc(m.transitions, m.name, string(o.Event))
		observe(m.acquire, o.Latency.Seconds(), m.name)
		if o.Handover > 0 {
			observe(m.handover, o.Handover.Seconds(), m.name)
		}
	case election.EventLost, election.EventResigned:
		set(m.status, 0, m.name)
		inc(m.transitions, m.name, string(o.Event))
	case election.EventRenewed:
		observe(m.renewLatency, o.Latency.Seconds(), m.name, "ok")
		observe(m.slack, o.Slack.Seconds(), m.name)
	case election.EventRenewFailed:
		inc(m.renewFailures, m.name)
		observe(m.renewLatency, o.Latency.Seconds(), m.name, "failed")
		observe(m.slack, o.Slack.Seconds(), m.name)
	}
}
