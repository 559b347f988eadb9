package promelection

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/reconkit/reconkit/election"
	"github.com/reconkit/reconkit/prommetrics/internal/promreg"
)

// New registers the election collectors on reg and returns the
// [election.Metrics] hook that feeds them, labelled name=name. Hooks for
// different names share the collectors; see the package documentation for
// the metrics. It fails if reg is nil, name is not valid UTF-8, or reg
// holds other collectors under the same metric names.
func New(reg prometheus.Registerer, name string) (election.Metrics, error) {
	r := promreg.New(reg, name)
	m := &electionMetrics{
		name: name,
		status: promreg.Register(r, prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "leader_election_master_status",
			Help: "Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 indicates master. 'name' is the string used to identify the lease.",
		}, []string{promreg.LabelName})),
		transitions: r.CounterVec("election", "transitions_total",
			"Changes of leadership of this candidate, by event: acquired, lost (the term ended without Resign) or resigned.", "event"),
		acquire: r.HistogramVec("election", "acquire_duration_seconds",
			"Time from the start of a campaign to the acquisition of a term.", promreg.WaitBuckets()),
		handover: r.HistogramVec("election", "handover_duration_seconds",
			"Time from the end of the previous holder's term, as this candidate observed it, to this candidate's acquisition; not observed when there was no previous holder.", promreg.WaitBuckets()),
		renewFailures: r.CounterVec("election", "renew_failures_total",
			"Failed attempts to renew the term."),
		renewLatency: r.HistogramVec("election", "renew_duration_seconds",
			"Round trip of each renewal attempt, by outcome: ok or failed.", promreg.RequestBuckets(), "outcome"),
		slack: r.HistogramVec("election", "renew_slack_seconds",
			"How long the term was still valid, by its holder's own deadline, when each renewal was sent.", promreg.SlackBuckets()),
	}
	if r.Err != nil {
		return nil, r.Err
	}
	promreg.Set(m.status, 0, name)
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
		promreg.Set(m.status, 1, m.name)
		promreg.Inc(m.transitions, m.name, string(o.Event))
		promreg.Observe(m.acquire, o.Latency.Seconds(), m.name)
		if o.Handover > 0 {
			promreg.Observe(m.handover, o.Handover.Seconds(), m.name)
		}
	case election.EventLost, election.EventResigned:
		promreg.Set(m.status, 0, m.name)
		promreg.Inc(m.transitions, m.name, string(o.Event))
	case election.EventRenewed:
		promreg.Observe(m.renewLatency, o.Latency.Seconds(), m.name, "ok")
		promreg.Observe(m.slack, o.Slack.Seconds(), m.name)
	case election.EventRenewFailed:
		promreg.Inc(m.renewFailures, m.name)
		promreg.Observe(m.renewLatency, o.Latency.Seconds(), m.name, "failed")
		promreg.Observe(m.slack, o.Slack.Seconds(), m.name)
	}
}
