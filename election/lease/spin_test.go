package lease

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
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
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = f.Campaign(ctx)
	}()
	defer func() { close(quit); cancel(); <-done }()
	require.Equal(t, "list", <-calls)
	require.Equal(t, "watch", <-calls) // ends at once
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
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = e.Campaign(ctx) // nobody names it: it waits
	}()
	defer func() { cancel(); <-done }()
	require.Equal(t, "watch", <-calls) // ends at once
	require.LessOrEqual(t, callsWhile(clk, calls, 20, 30*time.Millisecond), 2, "LeaseCandidate watches within 600ms of fake time")
}
