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
	"k8s.io/client-go/kubernetes"

	"github.com/reconkit/reconkit/kubefake"
	"github.com/reconkit/reconkit/versiongate"
	"github.com/reconkit/reconkit/versiongate/versiongatetest"
)

// A record deleted by hand (not by the reaper) while a new-release leader
// waits to restrict is no proof that its node stopped: the node serves
// until its next keep-alive learns of the loss, a third of its 40s TTL
// later. The leader's store counts the record until the heartbeat it named
// is gone (the node's keep-alive deletes it as it stops) or judged dead,
// so the old node has stopped serving before the leader reconciles.
func TestRecordDeletedByHandIsNoProofOfDeath(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		handDeleteRound(t, kubefake.NewClientset(), "hand", func() {
			time.Sleep(time.Minute)
			synctest.Wait()
		})
	})
}

// The same on a real apiserver, in real time: the leader waits until the
// old node's record blocks it, and the record is deleted then.
func TestRecordDeletedByHandIsNoProofOfDeathAPIServer(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a kube-apiserver (internal/testenv); skipped under -short")
	}
	cs := clientFor(t, apiServer(t))
	handDeleteRound(t, cs, uniqueGate("hand"), nil)
}

// handDeleteRound runs an old node (1.0, 40s records) serving and a
// new-release leader (2.0, which must restrict) on cs, deletes the old
// node's record by hand once the leader waits for it (after settle, if
// not nil; otherwise once the leader reports it blocking), and checks that
// the old node stopped serving before the leader reconciled.
func handDeleteRound(t *testing.T, cs kubernetes.Interface, gate string, settle func()) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	writeStatus(t, ctx, cs, gate, 3, statusAt(t, "1.0.0", versiongate.Release{Major: 1}))
	const ttl = 40 * time.Second

	never := versiongate.CandidateFunc(func(ctx context.Context) (versiongate.Term, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	})
	old, err := versiongate.New(versiongate.Config{
		Store: newStore(t, cs, gate, nil), NodeID: "old", Version: version(t, "1.0.0"),
		MinimumCompatibleRelease: versiongate.Release{Major: 1}, RecordTTL: ttl,
		Candidate: never, Reconcile: func(context.Context, versiongate.Term) error { return nil },
	})
	require.NoError(t, err)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	var stoppedAt atomic.Pointer[time.Time]
	wg.Add(1)
	go func() {
		defer wg.Done()
		err := old.Run(ctx)
		if errors.Is(err, versiongate.ErrRecordLost) {
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
		Store: newStore(t, cs, gate, nil), NodeID: "new", Version: version(t, "2.0.0"),
		MinimumCompatibleRelease: versiongate.Release{Major: 2}, RecordTTL: ttl,
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
	// The leader waits for the old node to go.
	if settle != nil {
		settle()
	} else {
		require.Eventually(t, func() bool { return len(leader.Blocking()) > 0 }, time.Minute, 10*time.Millisecond, "the leader waits for the old node")
	}
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
	require.False(t, servedWhileWorking.Load(), "the old node served while the leader reconciled")
	require.False(t, at.Before(*stopped), "the leader reconciled before the old node stopped")
	// The bound the package doc states: TTL + margin + TTL/3.
	require.LessOrEqual(t, at.Sub(deleted), ttl+4*time.Second+ttl/3+versiongate.DefaultSettleTime)
}
