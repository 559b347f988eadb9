package ccm_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/cloud-provider/api"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/reconkit/reconkit/backoff"
	"github.com/reconkit/reconkit/internal/testenv"
	"github.com/reconkit/reconkit/lbrecon"
	"github.com/reconkit/reconkit/lbrecon/ccm"
	"github.com/reconkit/reconkit/lbrecon/lbrecontest"
)

func createService(t *testing.T, cs kubernetes.Interface, name string) *v1.Service {
	t.Helper()
	svc := service("")
	svc.Name, svc.UID = name, ""
	for i := range svc.Spec.Ports {
		svc.Spec.Ports[i].NodePort = 0
	}
	got, err := cs.CoreV1().Services("default").Create(t.Context(), svc, metav1.CreateOptions{})
	require.NoError(t, err)
	return got
}

// The ConfigMap journal on the real apiserver: its shards pass the
// apiserver's validation at the scale of a 5,000-node Service with 4 ports,
// each under the 1 MiB bound, owned by the Service; the Service itself is
// never written; a shard the apiserver refuses is a permanent error that
// says what to do.
func TestConfigMapJournalOnTheRealAPIServer(t *testing.T) {
	a := testenv.APIServer(t)
	cs := kubernetes.NewForConfigOrDie(a.Config())
	ctx := t.Context()
	svc := createService(t, cs, "j")
	j := ccm.NewConfigMapJournal(cs.CoreV1(), ccm.ConfigMapJournalOptions{})
	scope := j.For(svc, "lb-1")
	got, err := scope.Load(ctx)
	require.NoError(t, err)
	require.Empty(t, got)

	intents := scaleIntents(string(svc.UID), 5000, 4)
	require.NoError(t, scope.Record(ctx, intents))
	list, err := cs.CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{LabelSelector: ccm.JournalServiceLabel + "=" + string(svc.UID)})
	require.NoError(t, err)
	require.Greater(t, len(list.Items), 1, "sharded")
	for _, cm := range list.Items {
		size := 0
		for _, v := range cm.Data {
			size += len(v)
		}
		require.Less(t, size, 1<<20, "shard %s", cm.Name)
		require.Len(t, cm.OwnerReferences, 1)
		require.Equal(t, svc.UID, cm.OwnerReferences[0].UID, "owned by the Service")
	}
	t.Logf("%d intents in %d shards", len(intents), len(list.Items))
	cur, err := cs.CoreV1().Services("default").Get(ctx, "j", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, svc.ResourceVersion, cur.ResourceVersion, "the Service itself is never written")

	got, err = j.For(svc, "lb-1").Load(ctx)
	require.NoError(t, err)
	require.Len(t, got, len(intents), "read back by another process")
	scopes, err := j.Scopes(ctx, svc)
	require.NoError(t, err)
	require.Equal(t, map[string]int{"lb-1": len(intents)}, scopes)
	require.NoError(t, scope.Forget(ctx, intents))
	list, err = cs.CoreV1().ConfigMaps("default").List(ctx, metav1.ListOptions{LabelSelector: ccm.JournalServiceLabel + "=" + string(svc.UID)})
	require.NoError(t, err)
	require.Empty(t, list.Items, "an emptied shard is deleted")

	// Shards past the apiserver's bound: 422, permanent, saying what to do.
	big := ccm.NewConfigMapJournal(cs.CoreV1(), ccm.ConfigMapJournalOptions{ShardBytes: 2 << 20}).For(svc, "lb-1")
	err = big.Record(ctx, scaleIntents(string(svc.UID), 5000, 4))
	require.ErrorIs(t, err, ccm.ErrJournalRefused)
	require.True(t, backoff.IsPermanent(err), "not retried: %v", err)
	require.Contains(t, err.Error(), "ShardBytes")
}

// A cloud-controller-manager crashes at every write of a converge, on a
// provider whose listing lags by one listing and which loses one create
// answer in 11; the next process (a fresh Balancer) reads the journal
// from the Service's ConfigMaps and creates nothing twice.
func TestCrashAtEveryWriteWithTheConfigMapJournal(t *testing.T) {
	a := testenv.APIServer(t)
	cs := kubernetes.NewForConfigOrDie(a.Config())
	run := func(t *testing.T, name string, n int, after bool) (writes, dups, inconsistent int) {
		clk := clocktesting.NewFakeClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
		eng := lbrecontest.New(lbrecontest.Config{Clock: clk, Pending: time.Second, LagListings: 1, DeleteDelay: time.Second,
			Integrity: true, UniqueBinds: true})
		eng.LoseCreateAnswers(11)
		cr := lbrecontest.NewCrasher(eng)
		svc := createService(t, cs, name)
		process := func() *ccm.Balancer {
			return newBalancer(t, cr, func(c *ccm.Config) {
				c.Journal = ccm.NewConfigMapJournal(cs.CoreV1(), ccm.ConfigMapJournalOptions{})
				c.Reconciler = lbrecon.Config{Clock: clk}
			})
		}
		drive := func(b *ccm.Balancer) error {
			for range 300 {
				_, err := b.EnsureLoadBalancer(t.Context(), "c", svc, nodes(3))
				var re *api.RetryError
				switch {
				case errors.As(err, &re):
					clk.Step(re.RetryAfter())
				case errors.Is(err, lbrecon.ErrInconsistent):
					inconsistent++
					clk.Step(time.Second)
				case err != nil && n > 0:
					return err // crashed
				default:
					return err
				}
				if n > 0 {
					select {
					case <-cr.Crashed():
						return lbrecontest.ErrProcessCrashed
					default:
					}
				}
			}
			return errors.New("not converged in 300 calls")
		}
		if n > 0 {
			cr.Arm(n, after)
			_ = drive(process())
			// The process died where this run says, not earlier or never.
			select {
			case <-cr.Crashed():
			default:
				t.Fatalf("%s: no crash at write %d", name, n)
			}
			require.NoError(t, cr.CrashedAt(n, after), name)
			cr.Restart()
		}
		n = 0
		require.NoError(t, drive(process()))
		writes = cr.Writes()
		names := map[string]int{}
		for _, o := range eng.Objects() {
			names[o.Kind+"/"+o.Name]++
		}
		for _, k := range names {
			dups += k - 1
		}
		return writes, dups, inconsistent
	}
	writes, dups, _ := run(t, "crash-none", 0, false)
	require.Zero(t, dups)
	var points, totalDups, totalIncons int
	for w := 1; w <= writes; w++ {
		for _, after := range []bool{false, true} {
			_, d, i := run(t, fmt.Sprintf("crash-%d-%v", w, after), w, after)
			points++
			totalDups += d
			totalIncons += i
		}
	}
	t.Logf("%d crash points: %d duplicates, %d ErrInconsistent", points, totalDups, totalIncons)
	require.Zero(t, totalDups)
	require.Zero(t, totalIncons)
	_ = context.Background
}
