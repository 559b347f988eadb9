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

func TestServiceJournalOnTheRealAPIServer(t *testing.T) {
	a := testenv.APIServer(t)
	cs := kubernetes.NewForConfigOrDie(a.Config())
	ctx := t.Context()
	svc := createService(t, cs, "j")
	j := ccm.NewServiceJournal(cs.CoreV1(), svc, "")
	got, err := j.Load(ctx)
	require.NoError(t, err)
	require.Empty(t, got)

	at := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	in1 := lbrecon.Intent{Kind: "backend", Name: "a", Spec: "s1", Token: "t1", At: at}
	in2 := lbrecon.Intent{Kind: "server", Name: "b", Spec: "s2", Token: "t2", At: at}
	require.NoError(t, j.Record(ctx, []lbrecon.Intent{in1}))

	// Another writer changes the Service in between: the next write is
	// refused by its resourceVersion precondition, read again and kept.
	cur, err := cs.CoreV1().Services("default").Get(ctx, "j", metav1.GetOptions{})
	require.NoError(t, err)
	cur.Labels = map[string]string{"changed": "by-another-writer"}
	_, err = cs.CoreV1().Services("default").Update(ctx, cur, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.NoError(t, j.Record(ctx, []lbrecon.Intent{in2}))
	cur, err = cs.CoreV1().Services("default").Get(ctx, "j", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "by-another-writer", cur.Labels["changed"], "the other writer's change kept")

	got, err = ccm.NewServiceJournal(cs.CoreV1(), svc, "").Load(ctx)
	require.NoError(t, err)
	require.ElementsMatch(t, []lbrecon.Intent{in1, in2}, got, "read back by another process")

	require.NoError(t, j.Forget(ctx, []lbrecon.Intent{{Kind: "backend", Name: "a"}, {Kind: "server", Name: "b"}}))
	cur, err = cs.CoreV1().Services("default").Get(ctx, "j", metav1.GetOptions{})
	require.NoError(t, err)
	require.NotContains(t, cur.Annotations, ccm.DefaultJournalAnnotation, "an empty journal removes the annotation")

	for name, content := range map[string]string{
		"not JSON":        "{garbage",
		"another version": `{"version":2,"intents":[]}`,
		"no name":         `{"version":1,"intents":[{"kind":"backend","at":"2030-01-01T00:00:00Z"}]}`,
	} {
		cur.Annotations = map[string]string{ccm.DefaultJournalAnnotation: content}
		cur, err = cs.CoreV1().Services("default").Update(ctx, cur, metav1.UpdateOptions{})
		require.NoError(t, err)
		_, err := ccm.NewServiceJournal(cs.CoreV1(), svc, "").Load(ctx)
		require.ErrorIs(t, err, lbrecon.ErrCorruptJournal, name)
		require.Contains(t, err.Error(), "default/j")
	}

	// A Service replaced by another of the same name is not the journal's.
	require.NoError(t, cs.CoreV1().Services("default").Delete(ctx, "j", metav1.DeleteOptions{}))
	createService(t, cs, "j")
	got, err = j.Load(ctx)
	require.NoError(t, err)
	require.Empty(t, got, "the journal went with its Service")
	require.ErrorIs(t, ccm.NewServiceJournal(cs.CoreV1(), svc, "").Record(ctx, []lbrecon.Intent{in1}), ccm.ErrServiceGone,
		"no intent, so no creation, for a Service that is gone")
}

// A cloud-controller-manager crashes at every write of a converge, on a
// provider whose listing lags by one listing and which loses one create
// answer in 11; the next process (a fresh Balancer) reads the journal
// from the Service's annotation and creates nothing twice.
func TestCrashAtEveryWriteWithTheServiceJournal(t *testing.T) {
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
				c.Journal = ccm.ServiceJournals(cs.CoreV1(), "")
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
