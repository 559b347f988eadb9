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
	"k8s.io/apimachinery/pkg/types"

	"github.com/reconkit/reconkit/kubefake"
	"github.com/reconkit/reconkit/versiongate"
	"github.com/reconkit/reconkit/versiongate/kubestore"
	"github.com/reconkit/reconkit/versiongate/versiongatetest"
)

// A deleted status is held by the finalizer: every status operation
// fails with an error that names the Lease and says how to clear it, never
// reading as a first boot.
func TestStatusDeletedIsUnreadable(t *testing.T) {
	ctx := testCtx(t)
	cs := kubefake.NewClientset()
	st := newStore(t, cs, "gone", nil)
	term := versiongatetest.NewTerm("l", 3)
	require.NoError(t, st.Fence(ctx, term))
	require.NoError(t, st.WriteStatus(ctx, term, []byte("v1"), 0))
	require.NoError(t, cs.CoordinationV1().Leases(testNamespace).Delete(ctx, "gone-status", metav1.DeleteOptions{}))

	_, err := st.ReadStatus(ctx)
	require.ErrorIs(t, err, kubestore.ErrStatusDeleted)
	require.ErrorContains(t, err, "Lease gates/gone-status")
	require.ErrorContains(t, err, "kubectl -n gates patch lease gone-status")
	require.ErrorIs(t, st.Fence(ctx, versiongatetest.NewTerm("next", 4)), kubestore.ErrStatusDeleted)
	require.ErrorIs(t, st.WriteStatus(ctx, term, []byte("v2"), 0), kubestore.ErrStatusDeleted)
	err = st.WatchStatus(ctx, 1, func(versiongate.StoredStatus) bool { return false })
	require.ErrorIs(t, err, kubestore.ErrStatusDeleted)
}

// Through the gate: a leader whose status was deleted waits (it neither
// reconciles nor writes), and a node waiting for the status keeps waiting.
// Once an operator removes the finalizer, the status is absent and the
// leader takes it as a missing status, reconciling and creating it.
func TestGateWaitsOnDeletedStatus(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		cs := kubefake.NewClientset()
		seed := newStore(t, cs, "gone", nil)
		old := versiongatetest.NewTerm("old", 3)
		require.NoError(t, seed.Fence(ctx, old))
		done := versiongate.Status{State: versiongate.StateDone, Version: version(t, "1.0.0"), MinimumCompatibleRelease: versiongate.Release{Major: 1}}
		b, err := done.Encode()
		require.NoError(t, err)
		require.NoError(t, seed.WriteStatus(ctx, old, b, 0))
		require.NoError(t, cs.CoordinationV1().Leases(testNamespace).Delete(ctx, "gone-status", metav1.DeleteOptions{}))

		var reconciles atomic.Int64
		var token atomic.Uint64
		token.Store(10)
		g, err := versiongate.New(versiongate.Config{
			Store: newStore(t, cs, "gone", nil), NodeID: "n1", Version: version(t, "1.1.0"),
			MinimumCompatibleRelease: versiongate.Release{Major: 1},
			Candidate: versiongate.CandidateFunc(func(ctx context.Context) (versiongate.Term, error) {
				return versiongatetest.NewTerm("n1", token.Add(1)), nil
			}),
			Reconcile: func(context.Context, versiongate.Term) error { reconciles.Add(1); return nil },
		})
		require.NoError(t, err)
		var wg sync.WaitGroup
		wg.Add(2)
		go func() { defer wg.Done(); _ = g.Run(ctx) }()
		ready := make(chan error, 1)
		go func() { defer wg.Done(); ready <- g.WaitReady(ctx) }()

		time.Sleep(2 * time.Minute)
		require.Zero(t, reconciles.Load(), "a leader reconciled on a deleted status")
		select {
		case err := <-ready:
			t.Fatalf("WaitReady returned on a deleted status: %v", err)
		default:
		}

		// The operator clears it.
		_, err = cs.CoordinationV1().Leases(testNamespace).Patch(ctx, "gone-status", types.JSONPatchType,
			[]byte(`[{"op":"remove","path":"/metadata/finalizers"}]`), metav1.PatchOptions{})
		require.NoError(t, err)
		require.NoError(t, <-ready)
		require.Positive(t, reconciles.Load())
		cancel()
		wg.Wait()
	})
}
