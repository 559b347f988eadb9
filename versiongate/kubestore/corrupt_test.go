package kubestore_test

import (
	"context"
	"encoding/base64"
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

// A status value an operator left that is not base64 is a corrupt status,
// not a failed read: ReadStatus says so (Corrupt wraps ErrCorruptStatus),
// a waiting node blocks on it and reports it (StatusError), and a leader
// reconciles and overwrites it, after which the node passes.
func TestNonBase64StatusIsCorruptAndRepaired(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		cs := kubefake.NewClientset()
		writeStatus(t, ctx, cs, "typo", 3, statusAt(t, "1.0.0", versiongate.Release{Major: 1}))
		_, err := cs.CoordinationV1().Leases(testNamespace).Patch(ctx, "typo-status", types.MergePatchType,
			[]byte(`{"metadata":{"annotations":{"`+kubestore.AnnotationValue+`":"state: DONE"}}}`), metav1.PatchOptions{})
		require.NoError(t, err)

		st, err := newStore(t, cs, "typo", nil).ReadStatus(ctx)
		require.NoError(t, err, "a corrupt status is no failed read")
		require.ErrorIs(t, st.Corrupt, versiongate.ErrCorruptStatus)
		require.ErrorContains(t, st.Corrupt, "annotation reconkit.io/value is not base64")
		require.Nil(t, st.Value)
		require.False(t, st.FirstBoot)

		waiter, err := versiongate.New(versiongate.Config{
			Store: newStore(t, cs, "typo", nil), NodeID: "n0", Version: version(t, "1.0.0"),
			MinimumCompatibleRelease: versiongate.Release{Major: 1},
			Decode:                   func(string, []byte) (versiongate.Release, bool, error) { return versiongate.Release{}, false, nil },
		})
		require.NoError(t, err)
		var wg sync.WaitGroup
		defer wg.Wait()
		defer cancel()
		ready := make(chan error, 1)
		wg.Add(1)
		go func() { defer wg.Done(); ready <- waiter.WaitReady(ctx) }()
		time.Sleep(time.Minute)
		synctest.Wait()
		select {
		case err := <-ready:
			t.Fatalf("WaitReady returned on a corrupt status: %v", err)
		default:
		}
		require.ErrorIs(t, waiter.StatusError(), versiongate.ErrCorruptStatus)

		var reconciles atomic.Int64
		var token atomic.Uint64
		token.Store(10)
		leader, err := versiongate.New(versiongate.Config{
			Store: newStore(t, cs, "typo", nil), NodeID: "n1", Version: version(t, "1.1.0"),
			MinimumCompatibleRelease: versiongate.Release{Major: 1},
			Candidate: versiongate.CandidateFunc(func(ctx context.Context) (versiongate.Term, error) {
				return versiongatetest.NewTerm("n1", token.Add(1)), nil
			}),
			Reconcile: func(context.Context, versiongate.Term) error { reconciles.Add(1); return nil },
		})
		require.NoError(t, err)
		wg.Add(1)
		go func() { defer wg.Done(); _ = leader.Run(ctx) }()
		select {
		case err := <-ready:
			require.NoError(t, err)
		case <-time.After(5 * time.Minute):
			t.Fatal("the leader did not repair the corrupt status within 5 minutes")
		}
		require.Positive(t, reconciles.Load(), "the status was overwritten without a reconcile")
		l, err := cs.CoordinationV1().Leases(testNamespace).Get(ctx, "typo-status", metav1.GetOptions{})
		require.NoError(t, err)
		b, err := base64.StdEncoding.DecodeString(l.Annotations[kubestore.AnnotationValue])
		require.NoError(t, err)
		got, err := versiongate.DecodeStatus(b)
		require.NoError(t, err)
		require.Equal(t, "1.1.0", got.Version.String())
	})
}
