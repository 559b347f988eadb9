package nodestatus_test

import (
	"math/rand/v2"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/reconkit/reconkit/kubefake"
	"github.com/reconkit/reconkit/nodestatus"
	"github.com/reconkit/reconkit/nodestatus/nodestatustest"
)

// instants runs a controller with Config.Rand r in a bubble for five
// minutes, its Lease updates failing with 503 from the third minute, and
// returns the instants, from its start, of its requests by verb and
// resource.
func instants(t *testing.T, r func() float64) map[string][]time.Duration {
	at := map[string][]time.Duration{}
	synctest.Test(t, func(t *testing.T) {
		cs := kubefake.NewClientset()
		p := nodestatustest.NewProvider(testNode("vk-0"))
		cfg := bubbleConfig(cs, p)
		cfg.Rand = r
		var mu sync.Mutex
		begin, failing := time.Now(), false
		cs.PrependReactor("*", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
			mu.Lock()
			defer mu.Unlock()
			key := a.GetVerb() + " " + a.GetResource().Resource
			at[key] = append(at[key], time.Since(begin))
			if failing && key == "update leases" {
				return true, nil, apierrors.NewServiceUnavailable("down")
			}
			return false, nil, nil
		})
		c := start(t, cfg)
		waitReady(t, c)
		pass(2 * time.Minute)
		mu.Lock()
		failing = true
		mu.Unlock()
		pass(3 * time.Minute)
		c.stop(t)
	})
	return at
}

// Config.Rand seeds every wait of the controller: two runs given sources
// with the same seed make every request (renewals, status reports, failed
// renewals' retries) at the same instants, and with another seed at other
// instants; renewals stay RenewInterval to RenewInterval × (1 +
// RenewJitter) apart.
func TestConfigRandDrawsEveryWait(t *testing.T) {
	seeded := func(seed uint64) func() float64 { return rand.New(rand.NewPCG(seed, 0)).Float64 }
	a, b := instants(t, seeded(1)), instants(t, seeded(1))
	require.Equal(t, a, b, "one seed, two runs")
	other := instants(t, seeded(2))
	for _, key := range []string{"update leases", "patch nodes"} {
		require.NotEqual(t, a[key], other[key], "%s: another seed", key)
	}
	updates := a["update leases"]
	require.Greater(t, len(updates), 5)
	for i := 1; i < 5; i++ {
		gap := updates[i] - updates[i-1]
		require.True(t, gap >= 10*time.Second && gap <= time.Duration(float64(10*time.Second)*(1+nodestatus.DefaultRenewJitter)), "renewal %d after %v", i, gap)
	}
}
