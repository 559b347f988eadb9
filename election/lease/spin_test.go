package lease

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/reconkit/reconkit/kubefake"
)

// endWatchesAtOnce makes every watch of resource end at once, with no
// event and no error, as a proxy or load balancer may, and reports each
// list and watch of it on the returned channel until quit is closed.
func endWatchesAtOnce(cs interface {
	PrependReactor(string, string, k8stesting.ReactionFunc)
	PrependWatchReactor(string, k8stesting.WatchReactionFunc)
}, resource string, quit <-chan struct{}) <-chan string {
	calls := make(chan string)
	report := func(what string) {
		select {
		case calls <- what:
		case <-quit:
		}
	}
	cs.PrependWatchReactor(resource, func(k8stesting.Action) (bool, watch.Interface, error) {
		report("watch")
		return true, watch.NewEmptyWatch(), nil
	})
	cs.PrependReactor("list", resource, func(k8stesting.Action) (bool, runtime.Object, error) {
		report("list")
		return false, nil, nil
	})
	return calls
}

// callsWhile steps clk n times by step and counts the requests reported on
// calls meanwhile. After each step it gives a request that the step made
// due 50ms to arrive: one that came later is counted at the next step or
// not at all, which can only flatter the code under test, never fail it.
func callsWhile(clk *testingclock.FakeClock, calls <-chan string, n int, step time.Duration) int {
	count := 0
	for range n {
		clk.Step(step)
		select {
		case <-calls:
			count++
		case <-time.After(50 * time.Millisecond):
		}
	}
	return count
}

// A follower whose Lease watch ends at once with nothing (an EOF from a
// proxy) lists and watches again once per RetryPeriod of its clock, not at
// once.
func TestFollowerWatchEndingAtOnceDoesNotSpin(t *testing.T) {
	clk := testingclock.NewFakeClock(epoch)
	cs := kubefake.Config{Clock: clk}.NewClientset(&coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "lease"},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr.To("other"), LeaseDurationSeconds: ptr.To[int32](60)},
	})
	quit := make(chan struct{})
	calls := endWatchesAtOnce(cs, "leases", quit)
	f := newFakeLease(t, cs, clk)
	ctx, cancel := context.WithTimeout(context.Background(), recvDeadline)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = f.Campaign(ctx)
	}()
	defer func() { close(quit); cancel(); recv(t, done, "Campaign's return") }()
	require.Equal(t, "list", recv(t, calls, "the first list"))
	require.Equal(t, "watch", recv(t, calls, "the first watch")) // ends at once
	// 20 steps of 30ms: two RetryPeriods (300ms), so at most a list and a
	// watch for each.
	require.LessOrEqual(t, callsWhile(clk, calls, 20, 30*time.Millisecond), 4, "requests within 600ms of fake time")
}

// A coordinated candidate whose LeaseCandidate watch ends at once renews
// and watches again once per RetryPeriod of its clock, not at once.
func TestLeaseCandidateWatchEndingAtOnceDoesNotSpin(t *testing.T) {
	clk := testingclock.NewFakeClock(epoch)
	cs := kubefake.Config{Clock: clk}.NewClientset()
	quit := make(chan struct{})
	calls := endWatchesAtOnce(cs, "leasecandidates", quit)
	e := newCoordinated(t, cs, clk)
	t.Cleanup(func() { close(quit) }) // before Close, which t.Cleanup runs later
	ctx, cancel := context.WithTimeout(context.Background(), recvDeadline)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = e.Campaign(ctx) // nobody names it: it waits
	}()
	defer func() { cancel(); recv(t, done, "Campaign's return") }()
	require.Equal(t, "watch", recv(t, calls, "the first LeaseCandidate watch")) // ends at once
	require.LessOrEqual(t, callsWhile(clk, calls, 20, 30*time.Millisecond), 2, "LeaseCandidate watches within 600ms of fake time")
}

// A leader whose every renewal is answered at once (a success that
// changes nothing, a conflict although the Lease is still ours, a 5xx)
// renews once per RetryPeriod of its clock; a conflict is retried at most
// three times within one renewal, not at once forever.
func TestRenewalAnsweredAtOnceDoesNotSpin(t *testing.T) {
	gvr := coordinationv1.SchemeGroupVersion.WithResource("leases")
	for _, tc := range []struct {
		name      string
		answer    func(cs *fake.Clientset) (runtime.Object, error)
		perPeriod int // updates one renewal may send
	}{
		{"success with no change", func(cs *fake.Clientset) (runtime.Object, error) {
			return cs.Tracker().Get(gvr, "ns", "lease")
		}, 1},
		{"conflict", func(*fake.Clientset) (runtime.Object, error) {
			return nil, apierrors.NewConflict(gvr.GroupResource(), "lease", errors.New("the object has been modified"))
		}, 3},
		{"5xx", func(*fake.Clientset) (runtime.Object, error) {
			return nil, apierrors.NewInternalError(errors.New("etcdserver: request timed out"))
		}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := testingclock.NewFakeClock(epoch)
			cs := kubefake.Config{Clock: clk}.NewClientset()
			quit := make(chan struct{})
			calls := make(chan string)
			var armed atomic.Bool
			cs.PrependReactor("update", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
				if !armed.Load() {
					return false, nil, nil
				}
				select {
				case calls <- "update":
				case <-quit:
				}
				obj, err := tc.answer(cs)
				return true, obj, err
			})
			f := newFakeLease(t, cs, clk)
			closeOnCleanup(t, f)
			ctx, cancel := context.WithTimeout(context.Background(), recvDeadline)
			defer cancel()
			_, err := f.Campaign(ctx)
			require.NoError(t, err)
			armed.Store(true)
			defer close(quit)
			// 40 steps of 30ms: four RetryPeriods (300ms) within the
			// RenewDeadline (2s), so at most four renewals and one more
			// that a late step may let through.
			n := callsWhile(clk, calls, 40, 30*time.Millisecond)
			require.LessOrEqual(t, n, 5*tc.perPeriod, "updates within 1.2s of fake time")
			require.Positive(t, n, "no renewal was tried")
			t.Logf("%d updates within 1.2s of fake time", n)
		})
	}
}
