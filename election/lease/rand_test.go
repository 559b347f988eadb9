package lease

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/reconkit/reconkit/election"
	"github.com/reconkit/reconkit/kubefake"
)

// requests runs one candidate with Config.Rand r in a bubble: it leads,
// then every request on resource answers 503 (from the start when
// leadFirst is false, so that it never leads on "leases"). It returns the
// instants of its requests on resource from the first 503 for 40 s. On
// "leasecandidates" the candidate is coordinated.
func requests(t *testing.T, r func() float64, leadFirst bool, resource string) []time.Duration {
	var at []time.Duration
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		var start time.Time
		counting := false
		srv := kubefake.Config{}.NewServer()
		cli := srv.NewClient()
		cli.PrependReactor("*", resource, func(k8stesting.Action) (bool, runtime.Object, error) {
			mu.Lock()
			defer mu.Unlock()
			if counting {
				at = append(at, time.Since(start))
			}
			return false, nil, nil
		})
		fail := func() {
			mu.Lock()
			defer mu.Unlock()
			srv.Inject(kubefake.Fault{Resource: resource, Answer: kubefake.Unavailable()})
			start, counting = time.Now(), true
		}
		if !leadFirst {
			fail()
		}
		cfg := Config{Client: cli, Namespace: "ns", Name: "lease", Identity: "me",
			LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second, Rand: r}
		if resource == "leasecandidates" {
			cfg.Coordinated = &Coordinated{BinaryVersion: "1.4.2"}
		}
		e, err := New(cfg)
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() {
			done <- election.Run(ctx, e, func(ctx context.Context, _ election.Leadership) error {
				<-ctx.Done()
				return nil
			}, election.WithRand(r))
		}()
		synctest.Wait()
		if leadFirst {
			require.True(t, e.Leading())
			fail()
		}
		<-time.After(40 * time.Second)
		cancel()
		require.NoError(t, <-done)
		require.NoError(t, e.Close())
		mu.Lock()
		defer mu.Unlock()
		at = append([]time.Duration(nil), at...)
	})
	return at
}

// Config.Rand seeds the elector's waits: the same source gives
// a leader's failing renewals, a candidate's failing campaigns and a
// coordinated candidate's failing LeaseCandidate the same instants in two
// runs, and another source other instants.
func TestConfigRandDrawsTheElectorsWaits(t *testing.T) {
	quarter := func() float64 { return 0.25 }
	threeQuarters := func() float64 { return 0.75 }
	for _, tc := range []struct {
		leadFirst bool
		resource  string
	}{{true, "leases"}, {false, "leases"}, {false, "leasecandidates"}} {
		a, b := requests(t, quarter, tc.leadFirst, tc.resource), requests(t, quarter, tc.leadFirst, tc.resource)
		require.Greater(t, len(a), 3, "%+v: requests %v", tc, a)
		require.Equal(t, a, b, "%+v: one source, two runs", tc)
		require.NotEqual(t, a, requests(t, threeQuarters, tc.leadFirst, tc.resource), "%+v: another source", tc)
	}
	require.Equal(t, 2100*time.Millisecond, candidateRetryWait(1, 2*time.Second, quarter))
}
