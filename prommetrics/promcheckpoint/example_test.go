package promcheckpoint_test

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/reconkit/reconkit/checkpoint"
	"github.com/reconkit/reconkit/prommetrics/promcheckpoint"
)

// A host that wants metrics for checkpoint alone hooks it to a registry of its
// own and serves that registry; here the observation checkpoint would make is
// fed by hand.
func Example() {
	reg := prometheus.NewRegistry()
	hook, err := promcheckpoint.New(reg, "agent")
	if err != nil {
		fmt.Println(err)
		return
	}
	// In a host: checkpoint.Config[T]{..., Metrics: hook}, then
	// http.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{})).
	hook.Observe(checkpoint.Observation{Event: checkpoint.EventRolledBack, Reason: checkpoint.ReasonCrashLoop})

	fams, _ := reg.Gather()
	for _, f := range fams {
		if f.GetName() != "reconkit_checkpoint_rollbacks_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			fmt.Println(f.GetName(), m.GetLabel()[len(m.GetLabel())-1].GetValue(), m.GetCounter().GetValue()+m.GetGauge().GetValue())
		}
	}
	// Output:
	// reconkit_checkpoint_rollbacks_total TrialCrashLoop 1
}
