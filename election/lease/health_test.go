package lease

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/reconkit/reconkit/election"
)

// setValidUntil moves a term's ValidUntil without telling its watchdog, as
// a stuck watchdog or a stopped process would leave it.
func (lt *leadership) setValidUntil(t time.Time) {
	lt.mu.Lock()
	defer lt.mu.Unlock()
	lt.validUntil = t
}

// TestHealthCheckSemantics checks client-go's HealthzAdaptor semantics on
// a fake clock: a non-leader and a leader within ValidUntil + grace are
// healthy; a live term past ValidUntil + grace is not, through Check and
// through ServeHTTP; an ended term is healthy again.
//
// It runs in a synctest bubble so that the term's watchdog and renewal
// loop are parked on the fake clock before ValidUntil is moved under them.
func TestHealthCheckSemantics(t *testing.T) {
	synctest.Test(t, testHealthCheckSemantics)
}

func testHealthCheckSemantics(t *testing.T) {
	clk := testingclock.NewFakeClock(epoch)
	f := newFakeLease(t, fake.NewClientset(), clk)
	const grace = time.Second
	hc := f.HealthCheck(grace)
	require.Equal(t, "leaderElection", hc.Name())
	serve := func() (int, string) {
		rec := httptest.NewRecorder()
		hc.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
		return rec.Code, rec.Body.String()
	}

	require.NoError(t, hc.Check(nil), "not leading yet")
	ctx := context.Background()
	l, err := f.Campaign(ctx)
	require.NoError(t, err)
	lt := l.(*leadership)
	synctest.Wait()
	require.NoError(t, hc.Check(nil), "leading within ValidUntil")
	code, body := serve()
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "ok\n", body)

	// ValidUntil passed but within the grace: still healthy.
	lt.setValidUntil(clk.Now().Add(-grace))
	require.NoError(t, hc.Check(nil), "past ValidUntil by exactly the grace")

	// Past ValidUntil + grace with the term still live: unhealthy.
	lt.setValidUntil(clk.Now().Add(-grace - time.Millisecond))
	require.NoError(t, l.Context().Err(), "the term is still live")
	require.ErrorIs(t, hc.Check(nil), election.ErrLeaderStale)
	code, body = serve()
	require.Equal(t, http.StatusInternalServerError, code)
	require.Contains(t, body, "leader past its ValidUntil")

	// Once the term ended the candidate no longer leads: healthy.
	lt.setValidUntil(clk.Now().Add(time.Second))
	require.NoError(t, l.Resign(ctx))
	lt.setValidUntil(clk.Now().Add(-time.Hour))
	require.NoError(t, hc.Check(nil), "after the term ended")
	code, _ = serve()
	require.Equal(t, http.StatusOK, code)
	require.NoError(t, f.Close())
}

// TestLeaseRenewFailedObserved: a renewal that fails is reported with its
// slack, and the term lives on until ValidUntil.
func TestLeaseRenewFailedObserved(t *testing.T) {
	clk := newArmedClock(epoch)
	cs := fake.NewClientset()
	var (
		mu  sync.Mutex
		obs []election.Observation
	)
	e, err := New(Config{
		Client: cs, Namespace: "ns", Name: "lease", Identity: "me",
		LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 300 * time.Millisecond,
		Clock: clk,
		Metrics: election.MetricsFunc(func(o election.Observation) {
			mu.Lock()
			defer mu.Unlock()
			obs = append(obs, o)
		}),
	})
	require.NoError(t, err)
	l, err := e.Campaign(context.Background())
	require.NoError(t, err)
	closeOnCleanup(t, e)
	cs.PrependReactor("update", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("apiserver unavailable")
	})
	require.Eventually(t, func() bool { return clk.armedFor(epoch.Add(300 * time.Millisecond)) }, 5*time.Second, time.Millisecond, "renewal timer armed")
	clk.Step(300 * time.Millisecond)
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(obs) >= 2
	}, 30*time.Second, time.Millisecond, "the failed renewal's observation")
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, election.EventAcquired, obs[0].Event)
	require.Equal(t, election.EventRenewFailed, obs[1].Event)
	require.Error(t, obs[1].Err)
	require.Equal(t, 1700*time.Millisecond, obs[1].Slack, "ValidUntil (2s) less the 300ms elapsed")
	require.NoError(t, l.Context().Err())
}
