package prommetrics

import (
	"errors"
	"fmt"
	"slices"
	"sync"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
)

// Namespace prefixes every metric of this package except those whose
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

// registrar registers collectors on a Registerer, reusing a collector of
// the same description registered by an earlier hook, and keeps the first
// error.
type registrar struct {
	reg  prometheus.Registerer
	name string
	err  error
}

func newRegistrar(reg prometheus.Registerer, name string) *registrar {
	r := &registrar{reg: reg, name: name}
	switch {
	case reg == nil:
		r.err = errors.New("prommetrics: nil Registerer")
	case !utf8.ValidString(name):
		r.err = fmt.Errorf("%w: %q", ErrInvalidName, name)
	}
	return r
}

// register registers c, or returns the equal collector registered before.
func register[C prometheus.Collector](r *registrar, c C) C {
	if r.err != nil {
		return c
	}
	if err := r.reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(C); ok {
				return existing
			}
		}
		r.err = fmt.Errorf("prommetrics: register collectors for %q: %w", r.name, err)
	}
	return c
}

// registerOwn registers c, which holds state of one hook and so cannot be
// shared with an earlier hook.
func (r *registrar) registerOwn(c prometheus.Collector) {
	if r.err != nil {
		return
	}
	if err := r.reg.Register(c); err != nil {
		r.err = fmt.Errorf("prommetrics: register collectors for %q (each name once per registry): %w", r.name, err)
	}
}

func (r *registrar) counterVec(subsystem, name, help string, labels ...string) *prometheus.CounterVec {
	return register(r, prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace, Subsystem: subsystem, Name: name, Help: help,
	}, append([]string{LabelName}, labels...)))
}

func (r *registrar) gaugeVec(subsystem, name, help string, labels ...string) *prometheus.GaugeVec {
	return register(r, prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: Namespace, Subsystem: subsystem, Name: name, Help: help,
	}, append([]string{LabelName}, labels...)))
}

func (r *registrar) histogramVec(subsystem, name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
	return register(r, prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: Namespace, Subsystem: subsystem, Name: name, Help: help, Buckets: buckets,
	}, append([]string{LabelName}, labels...)))
}

// Label values come from the hooked packages' own constants and the
// host's name, which the constructors validate; with a value Prometheus
// refuses anyway, the observation is dropped rather than panicking.

func inc(v *prometheus.CounterVec, lvs ...string) {
	if c, err := v.GetMetricWithLabelValues(lvs...); err == nil {
		c.Inc()
	}
}

func set(v *prometheus.GaugeVec, x float64, lvs ...string) {
	if g, err := v.GetMetricWithLabelValues(lvs...); err == nil {
		g.Set(x)
	}
}

func observe(v *prometheus.HistogramVec, x float64, lvs ...string) {
	if h, err := v.GetMetricWithLabelValues(lvs...); err == nil {
		h.Observe(x)
	}
}

// phaseGauge is a one-hot gauge: 1 for the current phase, 0 for every
// other phase that has a series (the known ones from the start, others
// once observed).
type phaseGauge struct {
	vec  *prometheus.GaugeVec
	name string

	mu     sync.Mutex
	phases []string
}

func newPhaseGauge[P ~string](vec *prometheus.GaugeVec, name string, known []P) *phaseGauge {
	g := &phaseGauge{vec: vec, name: name}
	for _, p := range known {
		g.phases = append(g.phases, string(p))
	}
	return g
}

// init exports every known phase at 0.
func (g *phaseGauge) init() {
	for _, p := range g.phases {
		set(g.vec, 0, g.name, p)
	}
}

// set makes phase the current one.
func (g *phaseGauge) set(phase string) {
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
		set(g.vec, x, g.name, p)
	}
}

// Buckets, in seconds.
var (
	// requestBuckets suits one API or cloud request: 5 ms to 10 s.
	requestBuckets = prometheus.DefBuckets
	// waitBuckets suits waits for leadership: 100 ms to about 3.4 min.
	waitBuckets = prometheus.ExponentialBuckets(0.1, 2, 12)
	// slackBuckets suits what is left of a lease: 250 ms to 32 s.
	slackBuckets = prometheus.ExponentialBuckets(0.25, 2, 8)
	// trialBuckets suits configuration trials: 10 s to about 2.8 h.
	trialBuckets = prometheus.ExponentialBuckets(10, 2, 11)
)
