package prommetrics_test

import (
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/reconkit/reconkit/checkpoint"
	"github.com/reconkit/reconkit/election"
	"github.com/reconkit/reconkit/lbrecon"
	"github.com/reconkit/reconkit/nodestatus"
	"github.com/reconkit/reconkit/prommetrics"
	"github.com/reconkit/reconkit/versiongate"
)

// compare scrapes reg over HTTP, as Prometheus does, and compares the
// named families with want (exposition text without HELP lines is not
// accepted, so want carries them).
func compare(t *testing.T, reg *prometheus.Registry, want string, names ...string) {
	t.Helper()
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()
	require.NoError(t, testutil.ScrapeAndCompare(srv.URL, strings.NewReader(want), names...))
}

// metric returns the sample of family name whose labels include labels.
func metric(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) *dto.Metric {
	t.Helper()
	fams, err := reg.Gather()
	require.NoError(t, err)
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
	next:
		for _, m := range f.GetMetric() {
			for k, v := range labels {
				found := false
				for _, lp := range m.GetLabel() {
					if lp.GetName() == k && lp.GetValue() == v {
						found = true
					}
				}
				if !found {
					continue next
				}
			}
			return m
		}
	}
	t.Fatalf("no sample of %s with labels %v", name, labels)
	return nil
}

// hist returns the sample count and sum of a histogram series.
func hist(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) (uint64, float64) {
	t.Helper()
	h := metric(t, reg, name, labels).GetHistogram()
	require.NotNil(t, h, "%s is a histogram", name)
	return h.GetSampleCount(), h.GetSampleSum()
}

func TestElection(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := prommetrics.Election(reg, "agents")
	require.NoError(t, err)
	other, err := prommetrics.Election(reg, "other") // shares the collectors
	require.NoError(t, err)
	compare(t, reg, `
# HELP leader_election_master_status Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 indicates master. 'name' is the string used to identify the lease.
# TYPE leader_election_master_status gauge
leader_election_master_status{name="agents"} 0
leader_election_master_status{name="other"} 0
`, "leader_election_master_status")

	m.Observe(election.Observation{Event: election.EventAcquired, Latency: 3 * time.Second, Handover: 2 * time.Second})
	m.Observe(election.Observation{Event: election.EventRenewed, Latency: 20 * time.Millisecond, Slack: 8 * time.Second})
	m.Observe(election.Observation{Event: election.EventRenewFailed, Latency: time.Second, Slack: 6 * time.Second, Err: errors.New("timeout")})
	other.Observe(election.Observation{Event: election.EventAcquired, Latency: time.Second}) // no handover observed
	other.Observe(election.Observation{Event: election.EventLost, Err: errors.New("expired")})
	compare(t, reg, `
# HELP leader_election_master_status Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 indicates master. 'name' is the string used to identify the lease.
# TYPE leader_election_master_status gauge
leader_election_master_status{name="agents"} 1
leader_election_master_status{name="other"} 0
# HELP reconkit_election_transitions_total Changes of leadership of this candidate, by event: acquired, lost (the term ended without Resign) or resigned.
# TYPE reconkit_election_transitions_total counter
reconkit_election_transitions_total{event="acquired",name="agents"} 1
reconkit_election_transitions_total{event="acquired",name="other"} 1
reconkit_election_transitions_total{event="lost",name="other"} 1
# HELP reconkit_election_renew_failures_total Failed attempts to renew the term.
# TYPE reconkit_election_renew_failures_total counter
reconkit_election_renew_failures_total{name="agents"} 1
`, "leader_election_master_status", "reconkit_election_transitions_total", "reconkit_election_renew_failures_total")
	n, sum := hist(t, reg, "reconkit_election_acquire_duration_seconds", map[string]string{"name": "agents"})
	require.Equal(t, uint64(1), n)
	require.InDelta(t, 3.0, sum, 1e-9)
	n, sum = hist(t, reg, "reconkit_election_handover_duration_seconds", map[string]string{"name": "agents"})
	require.Equal(t, uint64(1), n)
	require.InDelta(t, 2.0, sum, 1e-9)
	count, err := testutil.GatherAndCount(reg, "reconkit_election_handover_duration_seconds")
	require.NoError(t, err)
	require.Equal(t, 1, count, "no handover observed without a previous holder")
	n, sum = hist(t, reg, "reconkit_election_renew_slack_seconds", map[string]string{"name": "agents"})
	require.Equal(t, uint64(2), n)
	require.InDelta(t, 14.0, sum, 1e-9)
	n, _ = hist(t, reg, "reconkit_election_renew_duration_seconds", map[string]string{"name": "agents", "outcome": "failed"})
	require.Equal(t, uint64(1), n)

	m.Observe(election.Observation{Event: election.EventResigned})
	require.Equal(t, 0.0, metric(t, reg, "leader_election_master_status", map[string]string{"name": "agents"}).GetGauge().GetValue())
}

func TestVersiongate(t *testing.T) {
	reg := prometheus.NewRegistry()
	clk := clocktesting.NewFakeClock(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC))
	m, err := prommetrics.Versiongate(reg, "agent", clk)
	require.NoError(t, err)
	phases := func(current string) string {
		var b strings.Builder
		b.WriteString("# HELP reconkit_versiongate_phase 1 for the gate's current phase, 0 for the others.\n# TYPE reconkit_versiongate_phase gauge\n")
		for _, p := range []string{"campaigning", "done", "idle", "reconciling", "restricting", "settling"} {
			v := "0"
			if p == current {
				v = "1"
			}
			b.WriteString(`reconkit_versiongate_phase{name="agent",phase="` + p + `"} ` + v + "\n")
		}
		return b.String()
	}
	compare(t, reg, phases(""), "reconkit_versiongate_phase")
	clk.Step(7 * time.Second)
	require.InDelta(t, 7.0, metric(t, reg, "reconkit_versiongate_keepalive_age_seconds", map[string]string{"name": "agent"}).GetGauge().GetValue(), 1e-9,
		"before the first keep-alive the age counts from the hook's creation")

	m.Observe(versiongate.Observation{Event: versiongate.EventPhase, Phase: versiongate.PhaseCampaigning})
	m.Observe(versiongate.Observation{Event: versiongate.EventPhase, Phase: versiongate.PhaseRestricting})
	compare(t, reg, phases("restricting"), "reconkit_versiongate_phase")
	m.Observe(versiongate.Observation{Event: versiongate.EventBlocking, Blocking: 3})
	m.Observe(versiongate.Observation{Event: versiongate.EventRestrict, Token: 9})
	m.Observe(versiongate.Observation{Event: versiongate.EventDone, Token: 9})
	m.Observe(versiongate.Observation{Event: versiongate.EventKeepAlive, Latency: 30 * time.Millisecond, ValidFor: 10 * time.Second})
	m.Observe(versiongate.Observation{Event: versiongate.EventRecordLost, Err: errors.New("lease expired")})
	compare(t, reg, `
# HELP reconkit_versiongate_blocking_nodes Nodes that keep the gate from finishing: incompatible nodes still registered.
# TYPE reconkit_versiongate_blocking_nodes gauge
reconkit_versiongate_blocking_nodes{name="agent"} 3
# HELP reconkit_versiongate_restricts_total Restricted statuses written by this node as leader.
# TYPE reconkit_versiongate_restricts_total counter
reconkit_versiongate_restricts_total{name="agent"} 1
# HELP reconkit_versiongate_done_total Done statuses written by this node as leader after its initial reconcile.
# TYPE reconkit_versiongate_done_total counter
reconkit_versiongate_done_total{name="agent"} 1
# HELP reconkit_versiongate_record_lost_total Times this node's record was lost or outlived its local validity deadline.
# TYPE reconkit_versiongate_record_lost_total counter
reconkit_versiongate_record_lost_total{name="agent"} 1
# HELP reconkit_versiongate_keepalive_age_seconds Time since the server last acknowledged a keep-alive of this node's record (since the hook was created, before the first).
# TYPE reconkit_versiongate_keepalive_age_seconds gauge
reconkit_versiongate_keepalive_age_seconds{name="agent"} 0
`, "reconkit_versiongate_blocking_nodes", "reconkit_versiongate_restricts_total", "reconkit_versiongate_done_total",
		"reconkit_versiongate_record_lost_total", "reconkit_versiongate_keepalive_age_seconds")
	clk.Step(90 * time.Second)
	require.InDelta(t, 90.0, metric(t, reg, "reconkit_versiongate_keepalive_age_seconds", map[string]string{"name": "agent"}).GetGauge().GetValue(), 1e-9,
		"the age is computed at scrape time on the injected clock")
	n, sum := hist(t, reg, "reconkit_versiongate_keepalive_duration_seconds", map[string]string{"name": "agent"})
	require.Equal(t, uint64(1), n)
	require.InDelta(t, 0.03, sum, 1e-9)

	// A phase the adapter does not know gets a series of its own.
	m.Observe(versiongate.Observation{Event: versiongate.EventPhase, Phase: "draining"})
	require.Equal(t, 1.0, metric(t, reg, "reconkit_versiongate_phase", map[string]string{"phase": "draining"}).GetGauge().GetValue())
	require.Equal(t, 0.0, metric(t, reg, "reconkit_versiongate_phase", map[string]string{"phase": "restricting"}).GetGauge().GetValue())

	_, err = prommetrics.Versiongate(reg, "agent", clk)
	require.Error(t, err, "one keep-alive age per name and registry")
}

func TestNodestatus(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := prommetrics.Nodestatus(reg, "node-1")
	require.NoError(t, err)
	m.Observe(nodestatus.Observation{Call: nodestatus.CallUpdateLease, Outcome: nodestatus.OutcomeOK, Code: 200, Latency: 40 * time.Millisecond})
	m.Observe(nodestatus.Observation{Call: nodestatus.CallUpdateLease, Outcome: nodestatus.OutcomeConflict, Code: 409, Latency: 10 * time.Millisecond})
	m.Observe(nodestatus.Observation{Call: nodestatus.CallPatchStatus, Outcome: nodestatus.OutcomeTransient, Code: 0, Latency: time.Second})
	m.Observe(nodestatus.Observation{Call: nodestatus.CallPing, Outcome: nodestatus.OutcomeOK, Latency: 5 * time.Millisecond})
	compare(t, reg, `
# HELP reconkit_nodestatus_requests_total API requests of the node controller (each retry counts), by call, outcome and HTTP status code (0 when no answer came).
# TYPE reconkit_nodestatus_requests_total counter
reconkit_nodestatus_requests_total{call="patch_node_status",code="0",name="node-1",outcome="transient"} 1
reconkit_nodestatus_requests_total{call="update_lease",code="200",name="node-1",outcome="ok"} 1
reconkit_nodestatus_requests_total{call="update_lease",code="409",name="node-1",outcome="conflict"} 1
# HELP reconkit_nodestatus_pings_total Calls of the provider's Ping, by outcome.
# TYPE reconkit_nodestatus_pings_total counter
reconkit_nodestatus_pings_total{name="node-1",outcome="ok"} 1
`, "reconkit_nodestatus_requests_total", "reconkit_nodestatus_pings_total")
	n, sum := hist(t, reg, "reconkit_nodestatus_request_duration_seconds", map[string]string{"call": "update_lease"})
	require.Equal(t, uint64(2), n, "heartbeat latency")
	require.InDelta(t, 0.05, sum, 1e-9)
	n, _ = hist(t, reg, "reconkit_nodestatus_ping_duration_seconds", map[string]string{"name": "node-1"})
	require.Equal(t, uint64(1), n)
}

func TestCheckpoint(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := prommetrics.Checkpoint(reg, "agent")
	require.NoError(t, err)
	m.Observe(checkpoint.Observation{Event: checkpoint.EventPhase, Phase: checkpoint.PhaseLocal})
	m.Observe(checkpoint.Observation{Event: checkpoint.EventPhase, Phase: checkpoint.PhaseTrial, ID: "a_1"})
	m.Observe(checkpoint.Observation{Event: checkpoint.EventTrialStarted, Phase: checkpoint.PhaseTrial, ID: "a_1", TriesLeft: 2})
	phaseWant := `
# HELP reconkit_checkpoint_phase 1 for the configuration controller's current phase, 0 for the others.
# TYPE reconkit_checkpoint_phase gauge
reconkit_checkpoint_phase{name="agent",phase="LastKnownGood"} 0
reconkit_checkpoint_phase{name="agent",phase="Local"} 0
reconkit_checkpoint_phase{name="agent",phase="RolledBack"} 0
reconkit_checkpoint_phase{name="agent",phase="Trial"} 1
# HELP reconkit_checkpoint_trial_tries_left Starts left to the configuration on trial before it is rolled back as a crash loop; 0 when none is on trial.
# TYPE reconkit_checkpoint_trial_tries_left gauge
reconkit_checkpoint_trial_tries_left{name="agent"} 2
`
	compare(t, reg, phaseWant, "reconkit_checkpoint_phase", "reconkit_checkpoint_trial_tries_left")
	m.Observe(checkpoint.Observation{Event: checkpoint.EventPhase, Phase: checkpoint.PhaseRolledBack})
	m.Observe(checkpoint.Observation{Event: checkpoint.EventRolledBack, Phase: checkpoint.PhaseRolledBack, ID: "a_1",
		Reason: checkpoint.ReasonProbeFailed, TrialTime: 2 * time.Minute})
	m.Observe(checkpoint.Observation{Event: checkpoint.EventPhase, Phase: checkpoint.PhaseTrial, ID: "b_2"})
	m.Observe(checkpoint.Observation{Event: checkpoint.EventTrialStarted, Phase: checkpoint.PhaseTrial, ID: "b_2", TriesLeft: 2})
	m.Observe(checkpoint.Observation{Event: checkpoint.EventPhase, Phase: checkpoint.PhaseLastKnownGood, ID: "b_2"})
	m.Observe(checkpoint.Observation{Event: checkpoint.EventConfirmed, Phase: checkpoint.PhaseLastKnownGood, ID: "b_2", TrialTime: 10 * time.Minute})
	compare(t, reg, `
# HELP reconkit_checkpoint_phase 1 for the configuration controller's current phase, 0 for the others.
# TYPE reconkit_checkpoint_phase gauge
reconkit_checkpoint_phase{name="agent",phase="LastKnownGood"} 1
reconkit_checkpoint_phase{name="agent",phase="Local"} 0
reconkit_checkpoint_phase{name="agent",phase="RolledBack"} 0
reconkit_checkpoint_phase{name="agent",phase="Trial"} 0
# HELP reconkit_checkpoint_trial_tries_left Starts left to the configuration on trial before it is rolled back as a crash loop; 0 when none is on trial.
# TYPE reconkit_checkpoint_trial_tries_left gauge
reconkit_checkpoint_trial_tries_left{name="agent"} 0
# HELP reconkit_checkpoint_rollbacks_total Assigned configurations rolled back, by the ConfigOK reason.
# TYPE reconkit_checkpoint_rollbacks_total counter
reconkit_checkpoint_rollbacks_total{name="agent",reason="TrialProbeFailed"} 1
# HELP reconkit_checkpoint_trials_started_total Starts of a configuration trial (at assignment, and at each restart that resumes one).
# TYPE reconkit_checkpoint_trials_started_total counter
reconkit_checkpoint_trials_started_total{name="agent"} 2
# HELP reconkit_checkpoint_confirmations_total Configurations that passed their trial or were confirmed, and became last-known-good.
# TYPE reconkit_checkpoint_confirmations_total counter
reconkit_checkpoint_confirmations_total{name="agent"} 1
`, "reconkit_checkpoint_phase", "reconkit_checkpoint_trial_tries_left", "reconkit_checkpoint_rollbacks_total",
		"reconkit_checkpoint_trials_started_total", "reconkit_checkpoint_confirmations_total")
	n, sum := hist(t, reg, "reconkit_checkpoint_trial_duration_seconds", map[string]string{"outcome": "rolled_back"})
	require.Equal(t, uint64(1), n)
	require.InDelta(t, 120.0, sum, 1e-9)
	n, sum = hist(t, reg, "reconkit_checkpoint_trial_duration_seconds", map[string]string{"outcome": "confirmed"})
	require.Equal(t, uint64(1), n)
	require.InDelta(t, 600.0, sum, 1e-9)
}

func TestLBRecon(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := prommetrics.LBRecon(reg, "lb")
	require.NoError(t, err)
	m.Observe(lbrecon.VerbCreate, lbrecon.OutcomeOK, 2*time.Second)
	m.Observe(lbrecon.VerbCreate, lbrecon.OutcomeRateLimited, 100*time.Millisecond)
	m.Observe(lbrecon.VerbReconcile, lbrecon.OutcomeOK, 5*time.Second)
	compare(t, reg, `
# HELP reconkit_lbrecon_calls_total Engine call attempts (each retry counts) and whole reconciliations (verb=reconcile), by verb and outcome.
# TYPE reconkit_lbrecon_calls_total counter
reconkit_lbrecon_calls_total{name="lb",outcome="ok",verb="create"} 1
reconkit_lbrecon_calls_total{name="lb",outcome="ok",verb="reconcile"} 1
reconkit_lbrecon_calls_total{name="lb",outcome="rate_limited",verb="create"} 1
`, "reconkit_lbrecon_calls_total")
	n, sum := hist(t, reg, "reconkit_lbrecon_call_duration_seconds", map[string]string{"verb": "create"})
	require.Equal(t, uint64(2), n)
	require.InDelta(t, 2.1, sum, 1e-9)
}

// TestRegistration: the collectors go on the registry passed, never the
// global one; bad input is an error, not a panic.
func TestRegistration(t *testing.T) {
	reg := prometheus.NewRegistry()
	_, err := prommetrics.Checkpoint(reg, "a")
	require.NoError(t, err)
	global, err := prometheus.DefaultGatherer.Gather()
	require.NoError(t, err)
	for _, f := range global {
		require.False(t, strings.HasPrefix(f.GetName(), "reconkit_"), "%s on the global registry", f.GetName())
		require.NotEqual(t, "leader_election_master_status", f.GetName())
	}
	_, err = prommetrics.Election(nil, "a")
	require.Error(t, err)
	_, err = prommetrics.LBRecon(reg, "\xff")
	require.ErrorIs(t, err, prommetrics.ErrInvalidName)
	clash := prometheus.NewRegistry()
	clash.MustRegister(prometheus.NewCounter(prometheus.CounterOpts{Name: "reconkit_lbrecon_calls_total", Help: "other"}))
	_, err = prommetrics.LBRecon(clash, "lb")
	require.ErrorContains(t, err, "prommetrics: register collectors for \"lb\"")
}
