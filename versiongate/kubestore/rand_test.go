package kubestore_test

import (
	"context"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/reconkit/reconkit/kubefake"
	"github.com/reconkit/reconkit/versiongate"
	"github.com/reconkit/reconkit/versiongate/kubestore"
)

// recordWatches runs WatchRecords over watches that end at once, with
// Config.Rand r, for 5 s of a bubble's time, and returns the instants of
// the record watches it opened.
func recordWatches(t *testing.T, r func() float64) []time.Duration {
	var at []time.Duration
	synctest.Test(t, func(t *testing.T) {
		cs, h := wrap(kubefake.NewClientset())
		start := time.Now()
		var mu sync.Mutex
		h.set(func(h *hooks) {
			h.watch = func(opts metav1.ListOptions) (watch.Interface, error) {
				if !strings.Contains(opts.LabelSelector, "="+kubestore.RoleHeartbeat) {
					mu.Lock()
					at = append(at, time.Since(start))
					mu.Unlock()
				}
				return watch.NewEmptyWatch(), nil
			}
		})
		st, err := kubestore.New(kubestore.Config{Client: cs, Namespace: testNamespace, Gate: "rand", Rand: r})
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		err = st.WatchRecords(ctx, 1, func([]versiongate.Record, int64) {})
		require.ErrorIs(t, err, context.DeadlineExceeded)
		mu.Lock()
		defer mu.Unlock()
		at = append([]time.Duration(nil), at...)
	})
	return at
}

// Config.Rand seeds the pauses before a watch that ended at once is opened
// again: sources with the same seed give the same instants in two runs,
// another seed other instants; each pause is its base (100ms doubling)
// plus up to half of it.
func TestConfigRandDrawsTheWatchPauses(t *testing.T) {
	seeded := func(seed uint64) func() float64 { return rand.New(rand.NewPCG(seed, 0)).Float64 }
	a := recordWatches(t, seeded(1))
	require.Greater(t, len(a), 4)
	for i, base := 1, 100*time.Millisecond; i < 5; i, base = i+1, 2*base {
		pause := a[i] - a[i-1]
		require.True(t, pause >= base && pause <= base+base/2, "pause %d: %v outside [%v, 1.5×]", i, pause, base)
	}
	require.Equal(t, a, recordWatches(t, seeded(1)), "one seed, two runs")
	require.NotEqual(t, a, recordWatches(t, seeded(2)), "another seed")
}
