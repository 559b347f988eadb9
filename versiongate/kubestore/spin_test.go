package kubestore_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
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

// errSpinning stops a watch loop that reopens without waiting, so that a
// spin fails the test instead of hanging synctest's clock.
var errSpinning = errors.New("test: watch reopened 1000 times")

// A watch that the server closes at once (an empty watch, as a proxy's
// EOF gives) is opened again only after a pause that grows while watches
// deliver nothing: counted over a minute of synctest's time.
func TestWatchEndingAtOnceDoesNotSpin(t *testing.T) {
	for _, tc := range []struct {
		name  string
		watch func(ctx context.Context, st versiongate.Store) error
	}{
		{"records", func(ctx context.Context, st versiongate.Store) error {
			return st.WatchRecords(ctx, 1, func([]versiongate.Record, int64) {})
		}},
		{"status", func(ctx context.Context, st versiongate.Store) error {
			return st.WatchStatus(ctx, 1, func(versiongate.StoredStatus) bool { return false })
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cs, h := wrap(kubefake.NewClientset())
				var watches atomic.Int64 // of the records or the status, not the reaper's
				h.set(func(h *hooks) {
					h.watch = func(opts metav1.ListOptions) (watch.Interface, error) {
						if strings.Contains(opts.LabelSelector, "="+kubestore.RoleHeartbeat) {
							return watch.NewEmptyWatch(), nil
						}
						if watches.Add(1) > 1000 {
							return nil, errSpinning
						}
						return watch.NewEmptyWatch(), nil
					}
				})
				st := newStore(t, cs, "spin", nil)
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				err := tc.watch(ctx, st)
				require.ErrorIs(t, err, context.DeadlineExceeded)
				// 100ms doubling to 5s: 0.1+0.2+...+3.2 = 6.3s in 7 watches,
				// then one every 5s: at most 7 + 54/5 + 1 = 18 in a minute.
				require.LessOrEqual(t, watches.Load(), int64(18), "watches opened in a minute")
				t.Logf("%d watches in a minute", watches.Load())
			})
		})
	}
}

// A watch whose context ends returns ctx.Err(), even when client-go
// reports the end as an error event (its decoder's "context canceled"),
// as the Store contract says; the event and ctx.Done are ready together,
// so the rounds cover both orders.
func TestWatchEndedByContextReturnsContextError(t *testing.T) {
	cs, h := wrap(kubefake.NewClientset())
	st := newStore(t, cs, "ctxend", nil)
	for range 20 {
		fw := watch.NewRaceFreeFake()
		h.set(func(h *hooks) {
			h.watch = func(metav1.ListOptions) (watch.Interface, error) { return fw, nil }
		})
		ctx, cancel := context.WithCancel(context.Background())
		errc := make(chan error, 1)
		go func() { errc <- st.WatchRecords(ctx, 1, func([]versiongate.Record, int64) {}) }()
		cancel()
		fw.Error(&metav1.Status{Status: metav1.StatusFailure, Message: "unable to decode an event from the watch stream: context canceled", Reason: metav1.StatusReasonInternalError, Code: 500})
		require.ErrorIs(t, recvErr(t, errc), context.Canceled)
	}
}

func recvErr(t *testing.T, ch <-chan error) error {
	t.Helper()
	tm := time.NewTimer(time.Minute)
	defer tm.Stop()
	select {
	case err := <-ch:
		return err
	case <-tm.C:
		t.Fatal("WatchRecords did not return within a minute")
		return nil
	}
}
