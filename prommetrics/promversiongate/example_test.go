package promversiongate_test

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/reconkit/reconkit/prommetrics/promversiongate"
	"github.com/reconkit/reconkit/versiongate"
)

// A host that wants metrics for versiongate alone hooks it to a registry of its
// own and serves that registry; here the observation versiongate would make is
// fed by hand.
func Example() {
	reg := prometheus.NewRegistry()
	hook, err := promversiongate.New(reg, "gate", nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	// In a host: versiongate.Config{..., Metrics: hook}, then
	// http.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{})).
	hook.Observe(versiongate.Observation{Event: versiongate.EventRestrict})

	fams, _ := reg.Gather()
	for _, f := range fams {
		if f.GetName() != "reconkit_versiongate_restricts_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			fmt.Println(f.GetName(), m.GetLabel()[len(m.GetLabel())-1].GetValue(), m.GetCounter().GetValue()+m.GetGauge().GetValue())
		}
	}
	// Output:
	// reconkit_versiongate_restricts_total gate 1
}
