package promlbrecon_test

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/reconkit/reconkit/lbrecon"
	"github.com/reconkit/reconkit/prommetrics/promlbrecon"
)

// A host that wants metrics for lbrecon alone hooks it to a registry of its
// own and serves that registry; here the observation lbrecon would make is
// fed by hand.
func Example() {
	reg := prometheus.NewRegistry()
	hook, err := promlbrecon.New(reg, "lb")
	if err != nil {
		fmt.Println(err)
		return
	}
	// In a host: lbrecon.Config{..., Metrics: hook}, then
	// http.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{})).
	hook.Observe(lbrecon.VerbCreate, lbrecon.OutcomeOK, 0)

	fams, _ := reg.Gather()
	for _, f := range fams {
		if f.GetName() != "reconkit_lbrecon_calls_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			fmt.Println(f.GetName(), m.GetLabel()[len(m.GetLabel())-1].GetValue(), m.GetCounter().GetValue()+m.GetGauge().GetValue())
		}
	}
	// Output:
	// reconkit_lbrecon_calls_total create 1
}
