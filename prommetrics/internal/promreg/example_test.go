package promreg_test

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/reconkit/reconkit/prommetrics/internal/promreg"
)

// Two hooks of different names share one collector on a registry, each
// with its own series; a one-hot gauge shows the current phase.
func Example() {
	reg := prometheus.NewRegistry()
	for _, name := range []string{"gate-a", "gate-b"} {
		r := promreg.New(reg, name)
		phase := r.GaugeVec("versiongate", "phase", "The gate's phase.", "phase")
		if r.Err != nil {
			fmt.Println(r.Err)
			return
		}
		g := promreg.NewPhaseGauge(phase, name, []string{"waiting", "ready"})
		g.Init()
		g.Set("ready")
	}
	families, _ := reg.Gather()
	for _, f := range families {
		for _, m := range f.GetMetric() {
			fmt.Println(f.GetName(), m.GetLabel()[0].GetValue(), m.GetLabel()[1].GetValue(), m.GetGauge().GetValue())
		}
	}
	fmt.Println(promreg.New(reg, "\xff").Err)
	// Output:
	// reconkit_versiongate_phase gate-a ready 1
	// reconkit_versiongate_phase gate-a waiting 0
	// reconkit_versiongate_phase gate-b ready 1
	// reconkit_versiongate_phase gate-b waiting 0
	// prommetrics: name is not valid UTF-8: "\xff"
}
