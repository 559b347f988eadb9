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
	"github.com/reconkit/reconkit/nodestatus"
)

// fakeHealth is a health check whose verdict the test sets. It models
// nothing of an election: only the two answers a check gives.
type fakeHealth struct{ err error }

func (f *fakeHealth) Check(*http.Request) error { return f.err }

func (f *fakeHealth) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if f.err != nil {
		http.Error(w, f.err.Error(), http.StatusInternalServerError)
		return
	}
	_, _ = io.WriteString(w, "ok\n")
}

func get(t *testing.T, h http.Handler, path string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	return rec.Code, rec.Body.String()
}

// /healthz is 200 while every agent's check passes and 500 naming the
// agents whose check fails; /healthz/<agent> is that agent's check alone.
func TestOpsHealthz(t *testing.T) {
	o := newOps()
	a1, a2 := &fakeHealth{}, &fakeHealth{}
	o.setHealth("agent-1", a1)
	o.setHealth("agent-2", a2)
	h := o.handler()

	code, body := get(t, h, "/healthz")
	require.Equal(t, http.StatusOK, code, body)
	require.Equal(t, "ok: agent-1, agent-2\n", body)

	a2.err = errors.New("leader past its ValidUntil")
	code, body = get(t, h, "/healthz")
	require.Equal(t, http.StatusInternalServerError, code)
	require.Equal(t, "unhealthy: agent-2: leader past its ValidUntil\n", body)
	code, _ = get(t, h, "/healthz/agent-1")
	require.Equal(t, http.StatusOK, code)
	code, body = get(t, h, "/healthz/agent-2")
	require.Equal(t, http.StatusInternalServerError, code)
	require.Contains(t, body, "ValidUntil")
	code, _ = get(t, h, "/healthz/agent-9")
	require.Equal(t, http.StatusNotFound, code)

	// A restarted agent's check replaces its predecessor's.
	o.setHealth("agent-2", &fakeHealth{})
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
	o.setHealth("agent-1", &fakeHealth{})
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
