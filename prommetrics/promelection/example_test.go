package promelection_test

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/reconkit/reconkit/election"
	"github.com/reconkit/reconkit/prommetrics/promelection"
)

// A host that wants metrics for election alone hooks it to a registry of its
// own and serves that registry; here the observation election would make is
// fed by hand.
func Example() {
	reg := prometheus.NewRegistry()
	hook, err := promelection.New(reg, "agents")
	if err != nil {
		fmt.Println(err)
		return
	}
	// In a host: election.Config{..., Metrics: hook}, then
	// http.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{})).
	hook.Observe(election.Observation{Event: election.EventAcquired})

	fams, _ := reg.Gather()
	for _, f := range fams {
		if f.GetName() != "reconkit_election_transitions_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			fmt.Println(f.GetName(), m.GetLabel()[len(m.GetLabel())-1].GetValue(), m.GetCounter().GetValue()+m.GetGauge().GetValue())
		}
	}
	// Output:
	// reconkit_election_transitions_total agents 1
}
