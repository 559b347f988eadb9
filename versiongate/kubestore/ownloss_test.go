package kubestore_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/reconkit/reconkit/kubefake"
	"github.com/reconkit/reconkit/versiongate"
)

// A record deleted alone (its heartbeat still renewed), as an operator
// or another publisher replacing an orphan does, is lost once its store's
// watch reports it: the next keep-alive returns ErrRecordLost although
// the heartbeat's renewal succeeds. In both record modes.
func TestRecordDeletedAloneIsLost(t *testing.T) {
	for _, mode := range []string{"records", "nodelease"} {
		t.Run(mode, func(t *testing.T) {
			ctx := testCtx(t)
			cs := kubefake.NewClientset()
			clk := newFakeClock()
			st := newStore(t, cs, "alone", clk)
			if mode == "nodelease" {
				st = newNodeLeaseStore(t, cs, "alone", clk, newRenewer(cs, clk).renew)
			}
			l, err := st.PublishRecord(ctx, "n1", []byte("v"), 10*time.Second)
			require.NoError(t, err)
			_, rev, err := st.ListRecords(ctx)
			require.NoError(t, err)
			wctx, cancel := context.WithCancel(ctx)
			done := make(chan struct{})
			go func() { defer close(done); _ = st.WatchRecords(wctx, rev, func([]versiongate.Record, int64) {}) }()
			t.Cleanup(func() { cancel(); <-done })
			_, err = st.KeepAlive(ctx, l)
			require.NoError(t, err)
			require.NoError(t, cs.CoordinationV1().Leases(testNamespace).Delete(ctx, "alone-n1", metav1.DeleteOptions{}))
			require.Eventually(t, func() bool {
				_, err := st.KeepAlive(ctx, l)
				return err != nil
			}, time.Minute, 10*time.Millisecond)
			_, err = st.KeepAlive(ctx, l)
			require.ErrorIs(t, err, versiongate.ErrRecordLost)
		})
	}
}
