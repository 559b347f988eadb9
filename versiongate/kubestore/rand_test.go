package kubestore_test

import (
	"context"
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

// Config.Rand is the source of the pauses before a watch that ended at
// once is opened again: with a source that always draws 0.25, each pause
// is its base (100ms doubling) plus a quarter of half of it, exactly.
func TestConfigRandDrawsTheWatchPauses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cs, h := wrap(kubefake.NewClientset())
		start := time.Now()
		var mu sync.Mutex
		var at []time.Duration // the record watches' instants
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
		st, err := kubestore.New(kubestore.Config{Client: cs, Namespace: testNamespace, Gate: "rand",
			Rand: func() float64 { return 0.25 }})
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
		defer cancel()
		err = st.WatchRecords(ctx, 1, func([]versiongate.Record, int64) {})
		require.ErrorIs(t, err, context.DeadlineExceeded)
		mu.Lock()
		defer mu.Unlock()
		// Pauses of 112.5ms, 225ms, 450ms, 900ms.
		want := []time.Duration{0, 112500 * time.Microsecond, 337500 * time.Microsecond, 787500 * time.Microsecond, 1687500 * time.Microsecond}
		require.Equal(t, want, at)
	})
}
