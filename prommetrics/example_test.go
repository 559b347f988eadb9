package prommetrics_test

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/reconkit/reconkit/checkpoint"
	"github.com/reconkit/reconkit/election"
	"github.com/reconkit/reconkit/prommetrics"
)

// A host makes a registry of its own, hooks each package to it and serves
// it; here the observations the packages would make are fed by hand.
func Example() {
	reg := prometheus.NewRegistry()
	elect, err := prommetrics.Election(reg, "agents")
	if err != nil {
		fmt.Println(err)
		return
	}
	config, err := prommetrics.Checkpoint(reg, "agent")
	if err != nil {
		fmt.Println(err)
		return
	}
	// In a host: election.Config{..., Metrics: elect} and
	// checkpoint.Config[T]{..., Metrics: config}, then
	// http.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{})).
	var _ http.Handler = promhttp.HandlerFor(reg, promhttp.HandlerOpts{})

	elect.Observe(election.Observation{Event: election.EventAcquired})
	config.Observe(checkpoint.Observation{Event: checkpoint.EventPhase, Phase: checkpoint.PhaseRolledBack})
	config.Observe(checkpoint.Observation{Event: checkpoint.EventRolledBack, Reason: checkpoint.ReasonCrashLoop})

	fams, _ := reg.Gather()
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			switch {
			case m.GetGauge() != nil && m.GetGauge().GetValue() != 0:
				fmt.Println(f.GetName(), strings.Join(labels, ","), m.GetGauge().GetValue())
			case m.GetCounter() != nil:
				fmt.Println(f.GetName(), strings.Join(labels, ","), m.GetCounter().GetValue())
			}
		}
	}
	// Output:
	// leader_election_master_status name=agents 1
	// reconkit_checkpoint_phase name=agent,phase=RolledBack 1
	// reconkit_checkpoint_rollbacks_total name=agent,reason=TrialCrashLoop 1
	// reconkit_election_transitions_total event=acquired,name=agents 1
}

// An agent that uses every package makes one call, and sets each hook as
// that package's Config.Metrics.
func ExampleAgent() {
	reg := prometheus.NewRegistry()
	hooks, err := prommetrics.Agent(reg, "node-1", nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	// In a host: election.Config{..., Metrics: hooks.Election},
	// nodestatus.Config{..., Metrics: hooks.Nodestatus}, and so on.
	hooks.Election.Observe(election.Observation{Event: election.EventAcquired})

	// A name is hooked once per registry.
	_, err = prommetrics.Agent(reg, "node-1", nil)
	fmt.Println(err != nil)
	// Output:
	// true
}
