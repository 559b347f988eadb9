package kubestore_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/reconkit/reconkit/kubefake"
	"github.com/reconkit/reconkit/versiongate"
	"github.com/reconkit/reconkit/versiongate/kubestore"
	"github.com/reconkit/reconkit/versiongate/versiongatetest"
)

// A deleted status is held by the finalizer: reads and writes fail with
// an error that names the Lease and says what happens, never reading as a
// first boot. The next term's Fence finishes the deletion and creates the
// Lease again, its fence carried on (a lower token is fenced off by the
// deleted Lease's term) and marked as deleted, so that it reads as a
// missing status, not a first boot. One that another finalizer holds
// stays, named.
func TestStatusDeletedIsUnreadableUntilTheNextFence(t *testing.T) {
	ctx := testCtx(t)
	cs := kubefake.NewClientset()
	leases := cs.CoordinationV1().Leases(testNamespace)
	st := newStore(t, cs, "gone", nil)
	term := versiongatetest.NewTerm("l", 3)
	require.NoError(t, st.Fence(ctx, term))
	require.NoError(t, st.WriteStatus(ctx, term, []byte("v1"), 0))
	require.NoError(t, leases.Delete(ctx, "gone-status", metav1.DeleteOptions{}))

	_, err := st.ReadStatus(ctx)
	require.ErrorIs(t, err, kubestore.ErrStatusDeleted)
	require.ErrorContains(t, err, "Lease gates/gone-status")
	require.ErrorContains(t, err, "finishes the deletion")
	require.ErrorContains(t, err, "kubectl -n gates patch lease gone-status")
	require.ErrorIs(t, st.WriteStatus(ctx, term, []byte("v2"), 0), kubestore.ErrStatusDeleted)
	err = st.WatchStatus(ctx, 1, func(versiongate.StoredStatus) bool { return false })
	require.ErrorIs(t, err, kubestore.ErrStatusDeleted)
	var fenced *versiongate.FencedOffError
	require.ErrorAs(t, st.Fence(ctx, versiongatetest.NewTerm("older", 2)), &fenced, "a lower token recreated the status")
	_, err = leases.Get(ctx, "gone-status", metav1.GetOptions{})
	require.NoError(t, err, "a fenced-off term finished the deletion")

	require.NoError(t, st.Fence(ctx, versiongatetest.NewTerm("next", 4)))
	got, err := st.ReadStatus(ctx)
	require.NoError(t, err)
	require.Nil(t, got.Value)
	require.False(t, got.FirstBoot, "a recreated status reads as a first boot")
	l, err := leases.Get(ctx, "gone-status", metav1.GetOptions{})
	require.NoError(t, err)
	require.Nil(t, l.DeletionTimestamp)
	require.Equal(t, "4", l.Annotations[kubestore.AnnotationTerm])
	require.NotEmpty(t, l.Annotations[kubestore.AnnotationStatusDeleted])
	require.Equal(t, []string{kubestore.Finalizer}, l.Finalizers)
	require.ErrorIs(t, st.WriteStatus(ctx, term, []byte("late"), 0), versiongate.ErrLeadershipLost, "the deleted Lease's fence was reset")

	// Another controller's finalizer keeps it: named, and nothing created.
	l.Finalizers = append(l.Finalizers, "example.com/keep")
	_, err = leases.Update(ctx, l, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.NoError(t, leases.Delete(ctx, "gone-status", metav1.DeleteOptions{}))
	err = st.Fence(ctx, versiongatetest.NewTerm("next", 5))
	require.ErrorIs(t, err, kubestore.ErrStatusDeleted)
	require.ErrorContains(t, err, "example.com/keep")
}

// Through the gate: a status Lease deleted by an operator while an old
// node still has a record (and may serve on the deleted status) is
// created again by the leader, without a status, which it treats as
// missing: it warns, neither reconciles nor writes while the old node has
// its record, and reconciles and writes once it goes; a node waiting for
// the status passes then. Meanwhile the gate's loops stay within their
// budget: no loop spins on the deleted Lease.
func TestGateRecreatesDeletedStatus(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		srv := kubefake.Config{}.NewServer()
		cs := srv.NewClient()      // the operator's and the old node's
		gateCli := srv.NewClient() // the gate's, whose requests count
		seed := newStore(t, cs, "gone", nil)
		old := versiongatetest.NewTerm("old", 3)
		require.NoError(t, seed.Fence(ctx, old))
		done := versiongate.Status{State: versiongate.StateDone, Version: version(t, "1.0.0"), MinimumCompatibleRelease: versiongate.Release{Major: 1}}
		b, err := done.Encode()
		require.NoError(t, err)
		require.NoError(t, seed.WriteStatus(ctx, old, b, 0))
		rec, err := versiongate.EncodeNodeRelease("old", version(t, "1.0.0"))
		require.NoError(t, err)
		oldLease, err := seed.PublishRecord(ctx, "old", rec, 40*time.Second)
		require.NoError(t, err)
		var wg sync.WaitGroup
		defer wg.Wait()
		defer cancel()
		wg.Add(1)
		go func() { // the old node's keep-alive
			defer wg.Done()
			for ctx.Err() == nil {
				time.Sleep(10 * time.Second)
				_, _ = seed.KeepAlive(ctx, oldLease)
			}
		}()
		require.NoError(t, cs.CoordinationV1().Leases(testNamespace).Delete(ctx, "gone-status", metav1.DeleteOptions{}))

		var reconciles atomic.Int64
		var token atomic.Uint64
		token.Store(10)
		events := &eventList{}
		g, err := versiongate.New(versiongate.Config{
			Store: newStore(t, gateCli, "gone", nil), NodeID: "n1", Version: version(t, "2.0.0"),
			MinimumCompatibleRelease: versiongate.Release{Major: 2},
			Candidate: versiongate.CandidateFunc(func(ctx context.Context) (versiongate.Term, error) {
				return versiongatetest.NewTerm("n1", token.Add(1)), nil
			}),
			Reconcile: func(context.Context, versiongate.Term) error { reconciles.Add(1); return nil },
			Events:    events,
		})
		require.NoError(t, err)
		wg.Add(2)
		go func() { defer wg.Done(); _ = g.Run(ctx) }()
		ready := make(chan error, 1)
		go func() { defer wg.Done(); ready <- g.WaitReady(ctx) }()

		time.Sleep(time.Minute)
		synctest.Wait()
		before := gateCli.Requests()
		time.Sleep(2 * time.Minute)
		synctest.Wait()
		sent := gateCli.Requests().Sub(before)
		require.Zero(t, reconciles.Load(), "a leader reconciled while an old node may serve on the deleted status")
		select {
		case err := <-ready:
			t.Fatalf("WaitReady returned while the old node has its record: %v", err)
		default:
		}
		l, err := cs.CoordinationV1().Leases(testNamespace).Get(ctx, "gone-status", metav1.GetOptions{})
		require.NoError(t, err)
		require.Nil(t, l.DeletionTimestamp, "the status Lease is still being deleted")
		require.NotEmpty(t, l.Annotations[kubestore.AnnotationStatusDeleted])
		require.NotContains(t, l.Annotations, kubestore.AnnotationValue)
		require.Contains(t, events.list(), "Warning "+versiongate.ReasonStatusMissing)
		// The gate's own heartbeat's renewals (10s records: one per 3.3s)
		// and the reaper Lease's (one per 10s), and nothing else: nothing
		// reads or writes the status in a loop.
		t.Logf("requests in 2 minutes after the first: %v", sent)
		require.LessOrEqual(t, sent.Total(), 120/3+120/10+2, "requests in 2 minutes: %v", sent)
		require.Equal(t, sent.Total(), sent[kubefake.Request{Verb: "update", Resource: "leases"}], "requests in 2 minutes: %v", sent)

		require.NoError(t, seed.DeleteRecord(ctx, oldLease))
		require.NoError(t, <-ready)
		require.Positive(t, reconciles.Load())
		got, err := newStore(t, cs, "gone", nil).ReadStatus(ctx)
		require.NoError(t, err)
		st, err := versiongate.DecodeStatus(got.Value)
		require.NoError(t, err)
		require.Equal(t, versiongate.Release{Major: 2}, st.MinimumCompatibleRelease)
	})
}
