package kubestore_test

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/reconkit/reconkit/internal/testenv"
	"github.com/reconkit/reconkit/versiongate"
	"github.com/reconkit/reconkit/versiongate/kubestore"
	"github.com/reconkit/reconkit/versiongate/versiongatetest"
)

// TestLeaderRecoversStatusDeletedMidTerm and the namespace case of
// TestLeaderRecoveryRefusedKeepsItsBudget on a real apiserver and
// namespace controller, whose finalizers, deletions and terminating
// namespaces are the real ones. The leader reconciles every second here,
// so that its read-back comes soon after the delete.
//   - The status Lease deleted while the leader keeps its term: the
//     leader finishes the deletion and creates it again within its term,
//     and a node that starts after the delete passes WaitReady.
//   - The gate's namespace deleted while a leader runs: the leader
//     removes the finalizer within its term, so the namespace's deletion
//     completes without Uninstall, and its fence, refused while the
//     namespace is gone, is retried with backoff. The namespace's deletion
//     takes the node's record too, which ends the term at the node's next
//     keep-alive, and a next term's Fence would remove the finalizer as
//     well: here the records live 60s (a keep-alive every 20s) and the
//     election grants one term only, so only the leader's read-back within
//     its term can let the namespace go.
func TestLeaderRecoversStatusDeletedMidTermAPIServer(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a kube-apiserver and kube-controller-manager (internal/testenv); skipped under -short")
	}
	a := testenv.APIServer(t)
	testenv.ControllerManager(t, a, "--controllers=namespace")
	cfg := a.Config()
	cs := clientFor(t, cfg)
	// Records of 60s are kept alive every 20s: a node learns that its
	// record is gone up to 20s after, and its term lasts until then.
	const recordTTL = 60 * time.Second

	// leader starts a leader of gate in ns and returns once its status is
	// done, with a count of its terms and of its requests. With oneTerm
	// the election grants it one term, and no other after it.
	leader := func(t *testing.T, ctx context.Context, wg *sync.WaitGroup, ns, gate string, oneTerm bool) (*atomic.Int64, *atomic.Int64) {
		var campaigns, sent atomic.Int64
		gcfg := rest.CopyConfig(cfg)
		gcfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return countingTransport{next: rt, n: &sent} })
		st, err := kubestore.New(kubestore.Config{Client: clientFor(t, gcfg), Namespace: ns, Gate: gate})
		require.NoError(t, err)
		g, err := versiongate.New(versiongate.Config{
			Store: st, NodeID: "a", Version: version(t, "2.0.0"),
			MinimumCompatibleRelease: versiongate.Release{Major: 2},
			Candidate: versiongate.CandidateFunc(func(ctx context.Context) (versiongate.Term, error) {
				if oneTerm && campaigns.Load() > 0 {
					<-ctx.Done()
					return nil, ctx.Err()
				}
				return versiongatetest.NewTerm("a", 10+uint64(campaigns.Add(1))), nil
			}),
			Reconcile:             func(context.Context, versiongate.Term) error { return nil },
			ReconcileInterval:     time.Second,
			RecordTTL:             recordTTL,
			RejoinAfterRecordLoss: true,
		})
		require.NoError(t, err)
		wg.Add(1)
		go func() { defer wg.Done(); _ = g.Run(ctx) }()
		require.NoError(t, versiongatetest.WaitPhase(ctx, g, versiongate.PhaseDone))
		return &campaigns, &sent
	}

	t.Run("status Lease", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		var wg sync.WaitGroup
		defer wg.Wait()
		defer cancel()
		ns := "midterm-status"
		createNamespace(t, cs, ns)
		gate := uniqueGate("midterm")
		campaigns, _ := leader(t, ctx, &wg, ns, gate, false)

		require.NoError(t, cs.CoordinationV1().Leases(ns).Delete(ctx, gate+"-status", metav1.DeleteOptions{}))
		deleted := time.Now()
		st, err := kubestore.New(kubestore.Config{Client: cs, Namespace: ns, Gate: gate})
		require.NoError(t, err)
		b, err := versiongate.New(versiongate.Config{
			Store: st, NodeID: "b", Version: version(t, "2.0.0"),
			MinimumCompatibleRelease: versiongate.Release{Major: 2},
			Candidate: versiongate.CandidateFunc(func(ctx context.Context) (versiongate.Term, error) {
				<-ctx.Done()
				return nil, ctx.Err()
			}),
			Reconcile: func(context.Context, versiongate.Term) error { return nil },
		})
		require.NoError(t, err)
		wg.Add(1)
		go func() { defer wg.Done(); _ = b.Run(ctx) }()
		require.NoError(t, b.WaitReady(ctx), "a node that started after the status Lease was deleted")
		t.Logf("node b ready %v after the delete", time.Since(deleted))
		l, err := cs.CoordinationV1().Leases(ns).Get(ctx, gate+"-status", metav1.GetOptions{})
		require.NoError(t, err)
		require.Nil(t, l.DeletionTimestamp)
		require.NotEmpty(t, l.Annotations[kubestore.AnnotationStatusDeleted])
		require.Equal(t, int64(1), campaigns.Load(), "recovered by a new term, not within the term")
	})

	t.Run("namespace", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		var wg sync.WaitGroup
		defer wg.Wait()
		defer cancel()
		ns := "midterm-namespace"
		createNamespace(t, cs, ns)
		campaigns, sent := leader(t, ctx, &wg, ns, "fleet", true)

		require.NoError(t, cs.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}))
		deleted := time.Now()
		require.Eventually(t, func() bool {
			_, err := cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
			return apierrors.IsNotFound(err)
		}, 2*time.Minute, 100*time.Millisecond, "the namespace is still there: the status Lease's finalizer holds it")
		t.Logf("namespace gone %v after its delete", time.Since(deleted))
		before, start := sent.Load(), time.Now()
		<-time.After(20 * time.Second)
		n := sent.Load() - before
		t.Logf("the leader sent %d requests in the %v after the namespace went", n, time.Since(start))
		// Its fence retried with backoff and its record's publish, with
		// theirs: a couple a second at most, never a spin.
		require.LessOrEqual(t, n, int64(2*time.Since(start)/time.Second))
		require.Equal(t, int64(1), campaigns.Load(), "one term only")
	})
}
