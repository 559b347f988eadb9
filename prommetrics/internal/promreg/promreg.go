package promreg

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
)

// Namespace prefixes every metric of the prommetrics packages except those whose
// names the ecosystem fixes (leader_election_master_status).
const Namespace = "reconkit"

// Label names shared by the collectors.
const (
	// LabelName carries the name the host gives a hook, so that several
	// elections, gates, controllers or reconcilers share a registry.
	LabelName = "name"
)

// ErrInvalidName marks a hook name that is not valid UTF-8, which
// Prometheus cannot carry as a label value.
var ErrInvalidName = errors.New("prommetrics: name is not valid UTF-8")

// Registrar registers collectors on a Registerer, reusing a collector of
// the same description registered by an earlier hook, and keeps the first
// error.
type Registrar struct {
	reg  prometheus.Registerer
	name string
	// Err is the first error met; the hook is not usable when it is set.
	Err error
}

// New returns a Registrar for the hook called name on reg; its Err is set
// at once when reg is nil or name is not valid UTF-8.
func New(reg prometheus.Registerer, name string) *Registrar {
	r := &Registrar{reg: reg, name: name}
	switch {
	case reg == nil:
		r.Err = errors.New("prommetrics: nil Registerer")
	case !utf8.ValidString(name):
		r.Err = fmt.Errorf("%w: %q", ErrInvalidName, name)
	}
	return r
}

// Register registers c, or returns the equal collector registered before.
func Register[C prometheus.Collector](r *Registrar, c C) C {
	if r.Err != nil {
		return c
	}
	if err := r.reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing
			}
		}
		r.Err = fmt.Errorf("prommetrics: register collectors for %q: %w", r.name, err)
	}
	return c
}

// RegisterOwn registers c, which holds state of one hook and so cannot be
// shared with an earlier hook.
func (r *Registrar) RegisterOwn(c prometheus.Collector) {
	if r.Err != nil {
		return
	}
	if err := r.reg.Register(c); err != nil {
		r.Err = fmt.Errorf("prommetrics: register collectors for %q (each name once per registry): %w", r.name, err)
	}
}

// CounterVec registers a counter vector labelled name and labels.
func (r *Registrar) CounterVec(subsystem, name, help string, labels ...string) *prometheus.CounterVec {
	return Register(r, prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace, Subsystem: subsystem, Name: name, Help: help,
	}, append([]string{LabelName}, labels...)))
}

// GaugeVec registers a gauge vector labelled name and labels.
func (r *Registrar) GaugeVec(subsystem, name, help string, labels ...string) *prometheus.GaugeVec {
	return Register(r, prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: Namespace, Subsystem: subsystem, Name: name, Help: help,
	}, append([]string{LabelName}, labels...)))
}

// HistogramVec registers a histogram vector labelled name and labels.
func (r *Registrar) HistogramVec(subsystem, name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
	return Register(r, prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: Namespace, Subsystem: subsystem, Name: name, Help: help, Buckets: buckets,
	}, append([]string{LabelName}, labels...)))
}

// Label values come from the hooked packages' own constants and the
// host's name, which the constructors validate; with a value Prometheus
// refuses anyway, the observation is dropped rather than panicking.

// Inc increments the series of v with the label values lvs.
func Inc(v *prometheus.CounterVec, lvs ...string) {
	if c, err := v.GetMetricWithLabelValues(lvs...); err == nil {
		c.Inc()
	}
}

// Set sets the series of v with the label values lvs to x.
func Set(v *prometheus.GaugeVec, x float64, lvs ...string) {
	if g, err := v.GetMetricWithLabelValues(lvs...); err == nil {
		g.Set(x)
	}
}

// Observe adds x to the series of v with the label values lvs.
func Observe(v *prometheus.HistogramVec, x float64, lvs ...string) {
	if h, err := v.GetMetricWithLabelValues(lvs...); err == nil {
		h.Observe(x)
	}
}

// PhaseGauge is a one-hot gauge: 1 for the current phase, 0 for every
// other phase that has a series (the known ones from the start, others
// once observed).
type PhaseGauge struct {
	vec  *prometheus.GaugeVec
	name string

	mu     sync.Mutex
	phases []string
}

// NewPhaseGauge returns the one-hot gauge of the hook called name over
// vec, knowing the phases known.
func NewPhaseGauge[P ~string](vec *prometheus.GaugeVec, name string, known []P) *PhaseGauge {
	g := &PhaseGauge{vec: vec, name: name}
	for _, p := range known {
		g.phases = append(g.phases, string(p))
	}
	return g
}

// Init exports every known phase at 0.
func (g *PhaseGauge) Init() {
	for _, p := range g.phases {
		Set(g.vec, 0, g.name, p)
	}
}

// Set makes phase the current one.
func (g *PhaseGauge) Set(phase string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !slices.Contains(g.phases, phase) {
		g.phases = append(g.phases, phase)
	}
	for _, p := range g.phases {
		x := 0.0
		if p == phase {
			x = 1
		}
		Set(g.vec, x, g.name, p)
	}
}

// Buckets, in seconds. Each call returns a new slice, so that no hook can
// change another's buckets.

// RequestBuckets suits one API or cloud request: 5 ms to 10 s.
func RequestBuckets() []float64 { return slices.Clone(prometheus.DefBuckets) }

// WaitBuckets suits waits for leadership: 100 ms to about 3.4 min.
func WaitBuckets() []float64 { return prometheus.ExponentialBuckets(0.1, 2, 12) }

// SlackBuckets suits what is left of a lease: 250 ms to 32 s.
func SlackBuckets() []float64 { return prometheus.ExponentialBuckets(0.25, 2, 8) }

// TrialBuckets suits configuration trials: 10 s to about 2.8 h.
func TrialBuckets() []float64 { return prometheus.ExponentialBuckets(10, 2, 11) }
