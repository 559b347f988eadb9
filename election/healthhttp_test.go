package election_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/reconkit/reconkit/election"
)

// As an http.Handler, the check answers 200 "ok" when healthy and 500 with
// the reason when the term is stale, as client-go's HealthzAdaptor does.
func TestHealthCheckServesHTTPStatus(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Unix(1000, 0))
	var cur election.Leadership = expiringTerm{ctx: context.Background(), validUntil: clk.Now()}
	hc := election.NewHealthCheck(func() election.Leadership { return cur }, clk, time.Second)
	get := func() *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		hc.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/healthz", nil))
		return w
	}
	w := get()
	require.Equal(t, http.StatusOK, w.Code)
	require.Equal(t, "ok\n", w.Body.String())
	clk.SetTime(clk.Now().Add(2 * time.Second))
	w = get()
	require.Equal(t, http.StatusInternalServerError, w.Code)
	require.True(t, strings.Contains(w.Body.String(), election.ErrLeaderStale.Error()), "body %q names the reason", w.Body.String())
}
