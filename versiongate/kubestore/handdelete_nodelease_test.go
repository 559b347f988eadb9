package kubestore_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/reconkit/reconkit/kubefake"
	"github.com/reconkit/reconkit/versiongate"
	"github.com/reconkit/reconkit/versiongate/versiongatetest"
)

// With records kept alive by node Leases, a record deleted by hand while
// a new-release leader waits to restrict is taken as its node's death at
// once (the store cannot stop a node Lease it does not write): the leader
// writes the restricted status at once. The old node's gate learns of the
// loss from its store's watch and stops at its next keep-alive, within a
// keep-alive period (RecordTTL/3) of the delete; the leader reconciles
// only SettleTime after its write, so with RecordTTL/3 below SettleTime
// (the defaults: 3.3s and 5s) the old node has stopped before the
// reconcile. These are the bounds the package doc states for this mode.
func TestNodeLeaseRecordDeletedByHandMidRestrict(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		cs := kubefake.NewClientset()
		const gate = "nlhand"
		writeStatus(t, ctx, cs, gate, 3, statusAt(t, "1.0.0", versiongate.Release{Major: 1}))
		r := newRenewer(cs, clock.RealClock{})
		var mu sync.Mutex
		sent := map[string]time.Time{}
		uids := map[string]types.UID{}
		renew := func(node string) {
			s, uid, ok := r.renew(node)
			if ok {
				mu.Lock()
				sent[node], uids[node] = s, uid
				mu.Unlock()
			}
		}
		hb := func(node string) (time.Time, types.UID, bool) {
			mu.Lock()
			defer mu.Unlock()
			s, ok := sent[node]
			return s, uids[node], ok
		}
		createNamespace(t, cs, nodeLeaseNamespace)
		renew("old")
		renew("new")
		var wg sync.WaitGroup
		defer wg.Wait()
		defer cancel()
		wg.Add(1)
		go func() { // the nodes' heartbeats: every 2s, 10s node Leases
			defer wg.Done()
			for ctx.Err() == nil {
				time.Sleep(2 * time.Second)
				renew("old")
				renew("new")
			}
		}()

		never := versiongate.CandidateFunc(func(ctx context.Context) (versiongate.Term, error) {
			<-ctx.Done()
			return nil, ctx.Err()
		})
		old, err := versiongate.New(versiongate.Config{
			Store: newNodeLeaseStore(t, cs, gate, nil, hb), NodeID: "old", Version: version(t, "1.0.0"),
			MinimumCompatibleRelease: versiongate.Release{Major: 1},
			Candidate:                never, Reconcile: func(context.Context, versiongate.Term) error { return nil },
		})
		require.NoError(t, err)
		var stoppedAt atomic.Pointer[time.Time]
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := old.Run(ctx); errors.Is(err, versiongate.ErrRecordLost) {
				now := time.Now()
				stoppedAt.Store(&now)
			}
		}()
		require.NoError(t, old.WaitReady(ctx))

		var token atomic.Uint64
		token.Store(10)
		worked := make(chan time.Time, 1)
		var servedWhileWorking atomic.Bool
		leader, err := versiongate.New(versiongate.Config{
			Store: newNodeLeaseStore(t, cs, gate, nil, hb), NodeID: "new", Version: version(t, "2.0.0"),
			MinimumCompatibleRelease: versiongate.Release{Major: 2},
			Candidate: versiongate.CandidateFunc(func(ctx context.Context) (versiongate.Term, error) {
				return versiongatetest.NewTerm("new", token.Add(1)), nil
			}),
			Reconcile: func(context.Context, versiongate.Term) error {
				if old.Ready() {
					servedWhileWorking.Store(true)
				}
				select {
				case worked <- time.Now():
				default:
				}
				return nil
			},
		})
		require.NoError(t, err)
		wg.Add(1)
		go func() { defer wg.Done(); _ = leader.Run(ctx) }()
		time.Sleep(time.Minute)
		synctest.Wait()
		require.Len(t, leader.Blocking(), 1, "the leader waits for the old node")
		require.Empty(t, worked, "the leader reconciled while an old node had a record")

		deleted := time.Now()
		require.NoError(t, cs.CoordinationV1().Leases(testNamespace).Delete(ctx, gate+"-old", metav1.DeleteOptions{}))
		var at time.Time
		select {
		case at = <-worked:
		case <-time.After(5 * time.Minute):
			t.Fatal("the leader did not reconcile within 5 minutes of the delete")
		}
		stopped := stoppedAt.Load()
		require.NotNil(t, stopped, "the old node did not stop serving")
		t.Logf("record deleted at 0s; the old node stopped at %v, the leader reconciled at %v", stopped.Sub(deleted), at.Sub(deleted))
		require.LessOrEqual(t, stopped.Sub(deleted), versiongate.DefaultRecordTTL/3+time.Second, "the old node served past its next keep-alive")
		require.GreaterOrEqual(t, at.Sub(deleted), versiongate.DefaultSettleTime, "the leader reconciled before SettleTime")
		require.False(t, servedWhileWorking.Load(), "the old node served while the leader reconciled")
		require.True(t, stopped.Before(at), "the leader reconciled before the old node stopped")
	})
}
