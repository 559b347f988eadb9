package promversiongate

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/utils/clock"

	"github.com/reconkit/reconkit/prommetrics/internal/promreg"
	"github.com/reconkit/reconkit/versiongate"
)

// versiongatePhases are the phases exported at 0 before the first
// observation; a phase not listed gets its series when first observed.
var versiongatePhases = []versiongate.Phase{
	versiongate.PhaseIdle, versiongate.PhaseCampaigning, versiongate.PhaseRestricting,
	versiongate.PhaseSettling, versiongate.PhaseReconciling, versiongate.PhaseDone,
}

// New registers the version-gate collectors on reg and returns the
// [versiongate.Metrics] hook that feeds them, labelled name=name. The
// keep-alive age is computed at each scrape on clk (nil means the real
// clock). Hooks for different names share the collectors, but one name
// may be hooked once per registry (its keep-alive age is a collector of
// its own). See the package documentation for the metrics.
func New(reg prometheus.Registerer, name string, clk clock.PassiveClock) (versiongate.Metrics, error) {
	if clk == nil {
		clk = clock.RealClock{}
	}
	r := promreg.New(reg, name)
	m := &versiongateMetrics{
		name:    name,
		clock:   clk,
		created: clk.Now(),
		phase: promreg.NewPhaseGauge(r.GaugeVec("versiongate", "phase",
			"1 for the gate's current phase, 0 for the others.", "phase"), name, versiongatePhases),
		blocking: r.GaugeVec("versiongate", "blocking_nodes",
			"Nodes that keep the gate from finishing: incompatible nodes still registered."),
		restricts: r.CounterVec("versiongate", "restricts_total",
			"Restricted statuses written by this node as leader."),
		dones: r.CounterVec("versiongate", "done_total",
			"Done statuses written by this node as leader after its initial reconcile."),
		keepAlive: r.HistogramVec("versiongate", "keepalive_duration_seconds",
			"Round trip of each acknowledged keep-alive of this node's record.", promreg.RequestBuckets()),
		lost: r.CounterVec("versiongate", "record_lost_total",
			"Times this node's record was lost or outlived its local validity deadline."),
	}
	r.RegisterOwn(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Namespace: promreg.Namespace, Subsystem: "versiongate", Name: "keepalive_age_seconds",
		Help:        "Time since the server last acknowledged a keep-alive of this node's record (since the hook was created, before the first).",
		ConstLabels: prometheus.Labels{promreg.LabelName: name},
	}, m.age))
	if r.Err != nil {
		return nil, r.Err
	}
	m.phase.Init()
	promreg.Set(m.blocking, 0, name)
	return m, nil
}

type versiongateMetrics struct {
	name      string
	clock     clock.PassiveClock
	created   time.Time
	phase     *promreg.PhaseGauge
	blocking  *prometheus.GaugeVec
	restricts *prometheus.CounterVec
	dones     *prometheus.CounterVec
	keepAlive *prometheus.HistogramVec
	lost      *prometheus.CounterVec

	mu      sync.Mutex
	lastAck time.Time
}

func (m *versiongateMetrics) age() float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	from := m.lastAck
	if from.IsZero() {
		from = m.created
	}
	return m.clock.Since(from).Seconds()
}

func (m *versiongateMetrics) Observe(o versiongate.Observation) {
	switch o.Event {
	case versiongate.EventPhase:
		m.phase.Set(string(o.Phase))
	case versiongate.EventBlocking:
		promreg.Set(m.blocking, float64(o.Blocking), m.name)
	case versiongate.EventRestrict:
		promreg.Inc(m.restricts, m.name)
	case versiongate.EventDone:
		promreg.Inc(m.dones, m.name)
	case versiongate.EventKeepAlive:
		m.mu.Lock()
		m.lastAck = m.clock.Now()
		m.mu.Unlock()
		promreg.Observe(m.keepAlive, o.Latency.Seconds(), m.name)
	case versiongate.EventRecordLost:
		promreg.Inc(m.lost, m.name)
	}
}
