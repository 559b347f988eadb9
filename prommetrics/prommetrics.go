package prommetrics

import (
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/utils/clock"

	"github.com/reconkit/reconkit/checkpoint"
	"github.com/reconkit/reconkit/election"
	"github.com/reconkit/reconkit/lbrecon"
	"github.com/reconkit/reconkit/nodestatus"
	"github.com/reconkit/reconkit/prommetrics/internal/promreg"
	"github.com/reconkit/reconkit/prommetrics/promcheckpoint"
	"github.com/reconkit/reconkit/prommetrics/promelection"
	"github.com/reconkit/reconkit/prommetrics/promlbrecon"
	"github.com/reconkit/reconkit/prommetrics/promnodestatus"
	"github.com/reconkit/reconkit/prommetrics/promversiongate"
	"github.com/reconkit/reconkit/versiongate"
)

// Namespace prefixes every metric of the prommetrics packages except those
// whose names the ecosystem fixes (leader_election_master_status).
const Namespace = promreg.Namespace

// Label names shared by the collectors.
const (
	// LabelName carries the name the host gives a hook, so that several
	// elections, gates, controllers or reconcilers share a registry.
	LabelName = promreg.LabelName
)

// ErrInvalidName marks a hook name that is not valid UTF-8, which
// Prometheus cannot carry as a label value. Every prommetrics subpackage
// returns it.
var ErrInvalidName = promreg.ErrInvalidName

// Hooks are the metrics hooks of one agent, one per package, each ready to
// set as that package's Config.Metrics.
type Hooks struct {
	Election    election.Metrics
	Versiongate versiongate.Metrics
	Nodestatus  nodestatus.Metrics
	Checkpoint  checkpoint.Metrics
	LBRecon     lbrecon.Metrics
}

// Agent registers the collectors of every package on reg and returns one
// hook per package, each labelled name=name: the one call an agent that
// uses every package makes. clk is the clock of the version gate's
// keep-alive age (nil means the real clock). It fails as the
// per-package constructors do; the collectors registered before a
// failure stay registered. A name may be passed to Agent once per
// registry (the gate's keep-alive age is a collector of its own).
func Agent(reg prometheus.Registerer, name string, clk clock.PassiveClock) (Hooks, error) {
	var h Hooks
	var err error
	if h.Election, err = promelection.New(reg, name); err != nil {
		return Hooks{}, err
	}
	if h.Versiongate, err = promversiongate.New(reg, name, clk); err != nil {
		return Hooks{}, err
	}
	if h.Nodestatus, err = promnodestatus.New(reg, name); err != nil {
		return Hooks{}, err
	}
	if h.Checkpoint, err = promcheckpoint.New(reg, name); err != nil {
		return Hooks{}, err
	}
	if h.LBRecon, err = promlbrecon.New(reg, name); err != nil {
		return Hooks{}, err
	}
	return h, nil
}

// Election is [promelection.New]: the election collectors on reg and the
// [election.Metrics] hook that feeds them, labelled name=name.
func Election(reg prometheus.Registerer, name string) (election.Metrics, error) {
	return promelection.New(reg, name)
}

// Versiongate is [promversiongate.New]: the version-gate collectors on reg
// and the [versiongate.Metrics] hook that feeds them, labelled name=name,
// the keep-alive age computed at each scrape on clk (nil means the real
// clock).
func Versiongate(reg prometheus.Registerer, name string, clk clock.PassiveClock) (versiongate.Metrics, error) {
	return promversiongate.New(reg, name, clk)
}

// Nodestatus is [promnodestatus.New]: the node-status collectors on reg
// and the [nodestatus.Metrics] hook that feeds them, labelled name=name.
func Nodestatus(reg prometheus.Registerer, name string) (nodestatus.Metrics, error) {
	return promnodestatus.New(reg, name)
}

// Checkpoint is [promcheckpoint.New]: the checkpoint collectors on reg and
// the [checkpoint.Metrics] hook that feeds them, labelled name=name.
func Checkpoint(reg prometheus.Registerer, name string) (checkpoint.Metrics, error) {
	return promcheckpoint.New(reg, name)
}

// LBRecon is [promlbrecon.New]: the load-balancer reconciler collectors on
// reg and the [lbrecon.Metrics] hook that feeds them, labelled name=name.
func LBRecon(reg prometheus.Registerer, name string) (lbrecon.Metrics, error) {
	return promlbrecon.New(reg, name)
}
