package prommetrics_test

import (
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/reconkit/reconkit/checkpoint"
	"github.com/reconkit/reconkit/election"
	"github.com/reconkit/reconkit/lbrecon"
	"github.com/reconkit/reconkit/nodestatus"
	"github.com/reconkit/reconkit/prommetrics"
	"github.com/reconkit/reconkit/versiongate"
)

// The hooks never panic: a label value Prometheus refuses (not valid
// UTF-8, from a host's reason or phase) drops the observation.
func TestHooksNeverPanicOnLabelValues(t *testing.T) {
	reg := prometheus.NewRegistry()
	cp, err := prommetrics.Checkpoint(reg, "agent")
	require.NoError(t, err)
	bad := "\xff"
	require.NotPanics(t, func() {
		cp.Observe(checkpoint.Observation{Event: checkpoint.EventRolledBack, Reason: bad})
		cp.Observe(checkpoint.Observation{Event: checkpoint.EventPhase, Phase: checkpoint.Phase(bad)})
	})
	vg, err := prommetrics.Versiongate(reg, "agent", clocktesting.NewFakeClock(time.Now()))
	require.NoError(t, err)
	require.NotPanics(t, func() {
		vg.Observe(versiongate.Observation{Event: versiongate.EventPhase, Phase: versiongate.Phase(bad)})
	})
	lb, err := prommetrics.LBRecon(reg, "agent")
	require.NoError(t, err)
	require.NotPanics(t, func() { lb.Observe(lbrecon.Verb(bad), lbrecon.Outcome(bad), time.Second) })
	_, err = reg.Gather()
	require.NoError(t, err, "the registry still gathers")
}

// The hooks are safe for concurrent use (run with -race), as the hooked
// packages' threading contracts require, and lose no observation.
func TestHooksAreSafeForConcurrentUse(t *testing.T) {
	reg := prometheus.NewRegistry()
	el, err := prommetrics.Election(reg, "e")
	require.NoError(t, err)
	ns, err := prommetrics.Nodestatus(reg, "n")
	require.NoError(t, err)
	cp, err := prommetrics.Checkpoint(reg, "c")
	require.NoError(t, err)
	vg, err := prommetrics.Versiongate(reg, "v", clocktesting.NewFakeClock(time.Now()))
	require.NoError(t, err)
	const goroutines, each = 8, 50
	var wg sync.WaitGroup
	for range goroutines {
		wg.Go(func() {
			for range each {
				el.Observe(election.Observation{Event: election.EventRenewFailed})
				ns.Observe(nodestatus.Observation{Call: nodestatus.CallUpdateLease, Outcome: nodestatus.OutcomeOK, Code: 200})
				cp.Observe(checkpoint.Observation{Event: checkpoint.EventPhase, Phase: checkpoint.PhaseTrial})
				vg.Observe(versiongate.Observation{Event: versiongate.EventKeepAlive})
				_, _ = reg.Gather()
			}
		})
	}
	wg.Wait()
	require.InDelta(t, goroutines*each, metric(t, reg, "reconkit_election_renew_failures_total", map[string]string{"name": "e"}).GetCounter().GetValue(), 0)
}
