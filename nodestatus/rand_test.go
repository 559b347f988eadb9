package nodestatus_test

import (
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

// Config.Rand is the source of every wait of the controller: with a
// source that always draws 0.25, Lease renewals come RenewInterval ×
// (1 + 0.25 × RenewJitter) apart exactly, and two runs make every request
// (status reports, failed renewals' retries) at the same instants, other
// than with another source.
func TestConfigRandDrawsEveryWait(t *testing.T) {
	quarter := func() float64 { return 0.25 }
	a, b := instants(t, quarter), instants(t, quarter)
	require.Equal(t, a, b, "one source, two runs")
	require.NotEqual(t, a, instants(t, func() float64 { return 0.75 }), "another source")
	renew := time.Duration(float64(10*time.Second) * (1 + 0.25*nodestatus.DefaultRenewJitter))
	updates := a["update leases"]
	require.Greater(t, len(updates), 5)
	for i := 1; i < 5; i++ {
		require.Equal(t, renew, updates[i]-updates[i-1], "renewal %d", i)
	}
}
