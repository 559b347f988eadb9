package kubestore_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/reconkit/reconkit/kubefake"
	"github.com/reconkit/reconkit/versiongate"
)

// neverWins is a Candidate whose Campaign waits until its context ends.
var neverWins = versiongate.CandidateFunc(func(ctx context.Context) (versiongate.Term, error) {
	<-ctx.Done()
	return nil, ctx.Err()
})

func version(t *testing.T, s string) versiongate.Version {
	t.Helper()
	v, err := versiongate.ParseVersion(s)
	require.NoError(t, err)
	return v
}

// A node cut off from the apiserver stops serving before the reaper
// judges its record dead, at default settings: its gate's Run returns
// ErrRecordLost at the start of its last acknowledged keep-alive plus the
// TTL less the margin, while the reaper (the observer, which holds the
// reaper Lease) deletes the heartbeat and then the record only after it
// saw no change of the heartbeat for the TTL plus the margin. Time is
// synctest's, so the ordering is exact.
func TestCutOffNodeStopsBeforeObserverDeletes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		cs := kubefake.NewClientset()
		ncs, nh := wrap(cs)
		node := newStore(t, ncs, "cut", nil)
		observer := newStore(t, cs, "cut", nil)
		var mu sync.Mutex
		var seen, deletedAt time.Time
		appeared, deleted := make(chan struct{}), make(chan struct{})
		var wg sync.WaitGroup
		wg.Add(2)
		go func() {
			defer wg.Done()
			seeRecords := func(changes []versiongate.Record, _ int64) {
				mu.Lock()
				defer mu.Unlock()
				for _, c := range changes {
					switch {
					case c.ID == "n1" && c.Value != nil && seen.IsZero():
						seen = time.Now()
						close(appeared)
					case c.ID == "n1" && c.Value == nil && deletedAt.IsZero():
						deletedAt = time.Now()
						close(deleted)
					}
				}
			}
			// The gate's clock and the stores' are synctest's: the
			// observer judges on the same time as the node.
			rs, rev, err := observer.ListRecords(ctx)
			if err != nil {
				return
			}
			seeRecords(rs, rev)
			_ = observer.WatchRecords(ctx, rev, seeRecords)
		}()
		// The observer takes the reaper Lease before the node's gate
		// watches at all.
		synctest.Wait()
		_, err := cs.CoordinationV1().Leases(testNamespace).Get(ctx, "cut-reaper", metav1.GetOptions{})
		require.NoError(t, err, "the observer holds the reaper Lease")

		g, err := versiongate.New(versiongate.Config{
			Store: node, NodeID: "n1", Version: version(t, "1.0.0"),
			Candidate: neverWins,
			Reconcile: func(context.Context, versiongate.Term) error { return nil },
		})
		require.NoError(t, err)

		var runAt time.Time
		var runErr error
		runDone := make(chan struct{})
		go func() {
			defer wg.Done()
			defer close(runDone)
			runErr = g.Run(ctx)
			runAt = time.Now()
		}()

		<-appeared
		// Let keep-alives run for a while, then cut the node off.
		time.Sleep(25 * time.Second)
		nh.cut.Store(true)
		cutAt := time.Now()
		<-runDone
		require.ErrorIs(t, runErr, versiongate.ErrRecordLost)
		<-deleted
		mu.Lock()
		defer mu.Unlock()
		require.True(t, runAt.Before(deletedAt), "the node stopped at %v, the observer deleted its record at %v", runAt.Sub(cutAt), deletedAt.Sub(cutAt))
		t.Logf("after the cut: the node stopped serving at +%v, the observer deleted its record at +%v", runAt.Sub(cutAt), deletedAt.Sub(cutAt))
		cancel()
		wg.Wait()
	})
}
