package lease

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/watch"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/ptr"

	"github.com/reconkit/reconkit/election"
	"github.com/reconkit/reconkit/kubefake"
)

// budgetWindow is the span over which a persistent answer's cost is
// counted, after budgetSettle of the same answer: the library's budget is
// at most one request per second per agent after 30s of one answer.
const (
	budgetSettle = 30 * time.Second
	budgetWindow = 60 * time.Second
)

// budgetCap is the number of requests after which the counted loop is
// parked until the test ends: a loop that spins would otherwise never let
// the bubble's clock move.
const budgetCap = 1000

var leasesGVR = coordinationv1.SchemeGroupVersion.WithResource("leases")

// persistentAnswers are the answers an apiserver can give for ever, each
// applied from the moment the candidate leads to every request on Leases
// (or, for the answers only writes get, to every write).
var persistentAnswers = []struct {
	name   string
	inject func(srv *kubefake.Server, cli *kubefake.Client, count func())
}{
	{"403 on every request", faultOn("", kubefake.Fail(apierrors.NewForbidden(leasesGVR.GroupResource(), "lease", errors.New("RBAC: access denied"))))},
	{"404 on every request", faultOn("", kubefake.Fail(apierrors.NewNotFound(leasesGVR.GroupResource(), "lease")))},
	{"409 on every write", writeFault(kubefake.Conflict())},
	{"422 on every write", writeFault(kubefake.Fail(apierrors.NewInvalid(coordinationv1.SchemeGroupVersion.WithKind("Lease").GroupKind(), "lease", field.ErrorList{field.Invalid(field.NewPath("spec"), nil, "denied by a webhook")})))},
	{"429 on every request", faultOn("", kubefake.TooManyRequests(1))},
	{"500 on every request", faultOn("", kubefake.InternalError())},
	{"503 on every request", faultOn("", kubefake.Unavailable())},
	{"410 on every watch", faultOn("watch", kubefake.Fail(apierrors.NewResourceExpired("too old resource version")))},
	{"every watch ends at once", func(_ *kubefake.Server, cli *kubefake.Client, count func()) {
		cli.PrependWatchReactor("leases", func(k8stesting.Action) (bool, watch.Interface, error) {
			count()
			return true, watch.NewEmptyWatch(), nil
		})
	}},
	{"connection refused", func(_ *kubefake.Server, cli *kubefake.Client, _ func()) { cli.Cut() }},
}

func faultOn(verb string, answer kubefake.Answer) func(*kubefake.Server, *kubefake.Client, func()) {
	return func(srv *kubefake.Server, _ *kubefake.Client, _ func()) {
		srv.Inject(kubefake.Fault{Verb: verb, Resource: "leases", Answer: answer})
	}
}

func writeFault(answer kubefake.Answer) func(*kubefake.Server, *kubefake.Client, func()) {
	return func(srv *kubefake.Server, _ *kubefake.Client, _ func()) {
		for _, verb := range []string{"create", "update", "patch", "delete"} {
			srv.Inject(kubefake.Fault{Verb: verb, Resource: "leases", Answer: answer})
		}
	}
}

// TestRequestBudgetUnderPersistentAnswers runs a candidate under
// election.Run at the default timings, lets it lead, then gives every
// request on Leases the same answer for good: the renewals fail, the term
// ends, and Run campaigns again against the same answer. After 30s of it,
// the candidate sends at most one request per second (renewals, reads,
// watches, takeover attempts and releases together), counted over the
// next 30s in a synctest bubble, so neither the machine's speed nor the
// scheduler plays a part.
//
// As a follower (the Lease held by another candidate for an hour), the
// same answers meet the follow loop alone: its reads, its watch and its
// polls.
func TestRequestBudgetUnderPersistentAnswers(t *testing.T) {
	for _, role := range []string{"leader", "follower"} {
		for _, tc := range persistentAnswers {
			t.Run(role+"/"+tc.name, func(t *testing.T) {
				requestBudget(t, role == "leader", tc.inject)
			})
		}
	}
}

// requestBudget runs one case of TestRequestBudgetUnderPersistentAnswers.
func requestBudget(t *testing.T, lead bool, inject func(*kubefake.Server, *kubefake.Client, func())) {
	synctest.Test(t, func(t *testing.T) {
		var objects []runtime.Object
		if !lead {
			now := metav1.NewMicroTime(time.Now())
			objects = append(objects, &coordinationv1.Lease{
				ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "lease"},
				Spec: coordinationv1.LeaseSpec{
					HolderIdentity: ptr.To("other"), LeaseDurationSeconds: ptr.To[int32](3600),
					AcquireTime: &now, RenewTime: &now, LeaseTransitions: ptr.To[int32](1),
				},
			})
		}
		srv := kubefake.Config{}.NewServer(objects...)
		cli := srv.NewClient()
		var counting atomic.Bool
		var n, total atomic.Int64
		park := make(chan struct{})
		count := func() {
			if counting.Load() {
				n.Add(1)
			}
			if total.Add(1) > budgetCap {
				<-park
			}
		}
		cli.PrependReactor("*", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
			count()
			return false, nil, nil
		})
		cli.PrependWatchReactor("leases", func(k8stesting.Action) (bool, watch.Interface, error) {
			count()
			return false, nil, nil
		})
		e, err := New(Config{Client: cli, Namespace: "ns", Name: "lease", Identity: "me"})
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			done <- election.Run(ctx, e, func(ctx context.Context, _ election.Leadership) error {
				<-ctx.Done()
				return nil
			})
		}()
		synctest.Wait()
		require.Equal(t, lead, e.Leading(), "leading before the answer began")

		inject(srv, cli, count)
		srv.EndWatches() // the answer begins as after a restart: open watches end
		<-time.After(budgetSettle)
		counting.Store(true)
		<-time.After(budgetWindow - budgetSettle)
		counting.Store(false)
		got := n.Load()
		spun := total.Load() > budgetCap
		close(park)
		t.Logf("%d requests in %v after %v of the answer", got, budgetWindow-budgetSettle, budgetSettle)

		cancel()
		require.NoError(t, <-done)
		require.NoError(t, e.Close())
		require.False(t, spun, "more than %d requests in %v: the loop spins", budgetCap, budgetWindow)
		require.LessOrEqual(t, got, int64((budgetWindow-budgetSettle)/time.Second), "requests: more than one a second")
	})
}

// A coordinated candidate whose LeaseCandidate watch ends at once, or
// whose LeaseCandidate requests all fail, retries after a wait that
// doubles from RetryPeriod to 30s: after 30s of it, at most one request a
// second (here a read, a write and a watch per 30s), where it paid that
// round every RetryPeriod before.
func TestLeaseCandidateRequestBudget(t *testing.T) {
	for _, tc := range []struct {
		name   string
		inject func(cli *kubefake.Client, count func())
	}{
		{"every watch ends at once", func(cli *kubefake.Client, count func()) {
			cli.PrependWatchReactor("leasecandidates", func(k8stesting.Action) (bool, watch.Interface, error) {
				count()
				return true, watch.NewEmptyWatch(), nil
			})
		}},
		{"500 on every request", func(cli *kubefake.Client, _ func()) {
			cli.Server().Inject(kubefake.Fault{Resource: "leasecandidates", Answer: kubefake.InternalError()})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cli := kubefake.Config{}.NewServer().NewClient()
				var counting atomic.Bool
				var n atomic.Int64
				count := func() {
					if counting.Load() {
						n.Add(1)
					}
				}
				cli.PrependReactor("*", "leasecandidates", func(k8stesting.Action) (bool, runtime.Object, error) {
					count()
					return false, nil, nil
				})
				cli.PrependWatchReactor("leasecandidates", func(k8stesting.Action) (bool, watch.Interface, error) {
					count()
					return false, nil, nil
				})
				tc.inject(cli, count)
				e, err := New(Config{
					Client: cli, Namespace: "ns", Name: "lease", Identity: "pod-0",
					Coordinated: &Coordinated{BinaryVersion: "1.4.2"},
				})
				require.NoError(t, err)
				ctx, cancel := context.WithCancel(context.Background())
				ch := campaignAsync(ctx, e) // nobody names it: it waits
				<-time.After(budgetSettle)
				counting.Store(true)
				<-time.After(budgetWindow - budgetSettle)
				counting.Store(false)
				got := n.Load()
				t.Logf("%d LeaseCandidate requests in %v after %v of the answer", got, budgetWindow-budgetSettle, budgetSettle)
				cancel()
				<-ch
				require.NoError(t, e.Close())
				require.LessOrEqual(t, got, int64((budgetWindow-budgetSettle)/time.Second), "requests: more than one a second")
			})
		})
	}
}

// Retries wait RetryPeriod plus up to 1.2 × RetryPeriod more, spread at
// random as client-go's candidates' are, so that followers whose watches
// one restart ended do not poll the apiserver in step.
func TestRetryWaitIsJittered(t *testing.T) {
	e, err := New(Config{Client: kubefake.NewClientset(), Namespace: "ns", Name: "lease", Identity: "me"})
	require.NoError(t, err)
	seen := map[time.Duration]bool{}
	for range 200 {
		d := e.retryWait()
		require.GreaterOrEqual(t, d, DefaultRetryPeriod)
		require.Less(t, d, DefaultRetryPeriod+time.Duration(leaseJitter*float64(DefaultRetryPeriod)))
		seen[d] = true
	}
	require.Greater(t, len(seen), 100, "waits of a fleet's followers must differ")
	require.NoError(t, e.Close())
}
