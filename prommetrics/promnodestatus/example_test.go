package promnodestatus_test

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/reconkit/reconkit/nodestatus"
	"github.com/reconkit/reconkit/prommetrics/promnodestatus"
)

// A host that wants metrics for nodestatus alone hooks it to a registry of its
// own and serves that registry; here the observation nodestatus would make is
// fed by hand.
func Example() {
	reg := prometheus.NewRegistry()
	hook, err := promnodestatus.New(reg, "node-1")
	if err != nil {
		fmt.Println(err)
		return
	}
	// In a host: nodestatus.Config{..., Metrics: hook}, then
	// http.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{})).
	hook.Observe(nodestatus.Observation{Call: nodestatus.CallPing, Outcome: nodestatus.OutcomeOK})

	fams, _ := reg.Gather()
	for _, f := range fams {
		if f.GetName() != "reconkit_nodestatus_pings_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			fmt.Println(f.GetName(), m.GetLabel()[len(m.GetLabel())-1].GetValue(), m.GetCounter().GetValue()+m.GetGauge().GetValue())
		}
	}
	// Output:
	// reconkit_nodestatus_pings_total ok 1
}
