package main

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/reconkit/reconkit/election"
	"github.com/reconkit/reconkit/healthz"
	"github.com/reconkit/reconkit/nodestatus"
)

// fakeCheck is a check whose verdict the test sets.
type fakeCheck struct{ err error }

func (f *fakeCheck) check(*http.Request) error { return f.err }

// agentHealth is an agent's checks as the program makes them, with
// verdicts the test sets.
func agentHealth(t *testing.T) (*healthz.Handler, map[string]*fakeCheck) {
	t.Helper()
	fakes := map[string]*fakeCheck{}
	var checks []healthz.Check
	for _, n := range []string{election.DefaultHealthCheckName, checkHeartbeat, checkRecord, checkTrial} {
		fakes[n] = &fakeCheck{}
		checks = append(checks, healthz.Check{Name: n, Checker: fakes[n].check})
	}
	h, err := healthz.New(checks...)
	require.NoError(t, err)
	return h, fakes
}

func get(t *testing.T, h http.Handler, path string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	return rec.Code, rec.Body.String()
}

// /healthz is 200 while every agent's checks pass and 500 naming the
// agents and the checks that fail; /healthz/<agent> is that agent's
// checks alone.
func TestOpsHealthz(t *testing.T) {
	o := newOps()
	h1, _ := agentHealth(t)
	h2, f2 := agentHealth(t)
	o.setHealth("agent-1", h1)
	o.setHealth("agent-2", h2)
	h := o.handler()

	code, body := get(t, h, "/healthz")
	require.Equal(t, http.StatusOK, code, body)
	require.Equal(t, "ok", body)
	code, body = get(t, h, "/healthz?verbose")
	require.Equal(t, http.StatusOK, code, body)
	require.Equal(t, "[+]agent-1 ok\n[+]agent-2 ok\nhealthz check passed\n", body)

	f2[checkHeartbeat].err = errors.New("no heartbeat for 5s")
	f2[checkRecord].err = errors.New("release record lost")
	code, body = get(t, h, "/healthz")
	require.Equal(t, http.StatusInternalServerError, code)
	require.Equal(t, "[+]agent-1 ok\n[-]agent-2 failed: nodeHeartbeat: no heartbeat for 5s releaseRecord: release record lost\nhealthz check failed\n", body)
	code, _ = get(t, h, "/healthz?exclude=agent-2")
	require.Equal(t, http.StatusOK, code)
	code, _ = get(t, h, "/healthz/agent-1")
	require.Equal(t, http.StatusOK, code)
	code, body = get(t, h, "/healthz/agent-2")
	require.Equal(t, http.StatusInternalServerError, code)
	require.Equal(t, "[+]leaderElection ok\n[-]nodeHeartbeat failed: no heartbeat for 5s\n[-]releaseRecord failed: release record lost\n[+]configTrial ok\nhealthz check failed\n", body)
	code, _ = get(t, h, "/healthz/agent-9")
	require.Equal(t, http.StatusNotFound, code)

	// A restarted agent's checks replace its predecessor's.
	h2, _ = agentHealth(t)
	o.setHealth("agent-2", h2)
	code, _ = get(t, h, "/healthz")
	require.Equal(t, http.StatusOK, code)
}

// /metrics serves the run's own registry, fed by every package's hook of
// every agent with the agent's name as label; a restarted agent reuses
// its hooks (a version gate's hook can be made once per name).
func TestOpsMetrics(t *testing.T) {
	o := newOps()
	h1, err := o.hooksFor("agent-1")
	require.NoError(t, err)
	again, err := o.hooksFor("agent-1")
	require.NoError(t, err, "the hooks of a restarted agent")
	require.Equal(t, h1, again)
	h2, err := o.hooksFor("agent-2")
	require.NoError(t, err)

	h1.Election.Observe(election.Observation{Event: election.EventAcquired, Token: 3})
	h2.Nodestatus.Observe(nodestatus.Observation{Call: nodestatus.CallUpdateLease, Outcome: nodestatus.OutcomeOK, Code: 200, Latency: time.Millisecond})
	code, body := get(t, o.handler(), "/metrics")
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, body, `leader_election_master_status{name="agent-1"} 1`)
	require.Contains(t, body, `leader_election_master_status{name="agent-2"} 0`)
	require.Contains(t, body, `reconkit_versiongate_phase{name="agent-1",phase="idle"}`)
	require.Contains(t, body, `reconkit_nodestatus_requests_total{call="update_lease",code="200",name="agent-2",outcome="ok"} 1`)
	require.Contains(t, body, `reconkit_checkpoint_phase{name="agent-2"`)
	require.NotContains(t, body, "go_goroutines", "the global registry's collectors are not served")
}

// serve answers on its listener until its context ends, then shuts down
// and returns nil; the port is closed after it returned.
func TestOpsServe(t *testing.T) {
	o := newOps()
	h1, _ := agentHealth(t)
	o.setHealth("agent-1", h1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ln, err := o.listen(ctx, "127.0.0.1:0")
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- o.serve(ctx, ln) }()

	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Get("http://" + ln.Addr().String() + "/healthz")
	require.NoError(t, err)
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.True(t, strings.HasPrefix(string(b), "ok"), "%s", b)

	cancel()
	select {
	case err := <-done:
		require.NoError(t, err, "a clean stop is not an error")
	case <-time.After(time.Minute):
		t.Fatal("serve did not return within a minute of its context's end")
	}
	_, err = client.Get("http://" + ln.Addr().String() + "/healthz")
	require.Error(t, err, "still serving after serve returned")

	_, err = o.listen(context.Background(), "127.0.0.1:-1")
	require.Error(t, err)
}
