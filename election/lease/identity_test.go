package lease

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/clock"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/reconkit/reconkit/election"
	"github.com/reconkit/reconkit/kubefake"
)

// newCoordinated is a coordinated candidate named "pod-0" on cs, as a
// process restarted with its predecessor's pod name is.
func newCoordinated(t *testing.T, cs *fake.Clientset, clk clock.Clock) *Elector {
	t.Helper()
	e, err := New(Config{
		Client: cs, Namespace: "ns", Name: "lease", Identity: "pod-0",
		LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 300 * time.Millisecond,
		Clock: clk, Coordinated: &Coordinated{BinaryVersion: "1.0.0"},
	})
	require.NoError(t, err)
	closeOnCleanup(t, e)
	return e
}

type won struct {
	l   election.Leadership
	err error
}

func campaignAsync(ctx context.Context, e *Elector) <-chan won {
	ch := make(chan won, 1)
	go func() {
		l, err := e.Campaign(ctx)
		ch <- won{l, err}
	}()
	return ch
}

// leaseWatches counts the Lease watches cs has served: a follower that
// decided to wait starts one, one that took the Lease does not.
func leaseWatches(cs *fake.Clientset) int {
	n := 0
	for _, a := range cs.Actions() {
		if a.GetVerb() == "watch" && a.GetResource().Resource == "leases" {
			n++
		}
	}
	return n
}

// awaitExpiryArmed waits until the follow loop has armed its wake-up for
// the expiry at: the watch event is in the snapshot before the loop steps
// and arms that timer, and a timer armed once the fake clock is at or past
// its instant waits for a later move of the clock that never comes.
func awaitExpiryArmed(t *testing.T, clk *armedClock, at time.Time) {
	t.Helper()
	require.Eventually(t, func() bool { return clk.armedFor(at) }, 10*time.Second, time.Millisecond, "expiry timer armed for %v", at)
}

// A coordinated candidate restarted with its predecessor's identity finds
// the Lease naming that identity with the acquireTime the predecessor
// wrote when it took it. The predecessor may be alive and cut off, its
// term live until its ValidUntil: the new process treats the term as
// anybody else's and takes the Lease only once it has seen the record
// unchanged for the lease duration, with a new transition (a new token).
func TestCoordinatedRestartDoesNotAdoptPredecessorsTerm(t *testing.T) {
	clk := newArmedClock(epoch)
	acquired := metav1.NewMicroTime(epoch.Add(-time.Minute)) // the predecessor's clock: ignored
	cs := kubefake.Config{Clock: clk}.NewClientset(&coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "lease"},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity: ptr.To("pod-0"), LeaseDurationSeconds: ptr.To[int32](3),
			AcquireTime: &acquired, RenewTime: &acquired, LeaseTransitions: ptr.To[int32](4),
			Strategy: ptr.To(coordinationv1.OldestEmulationVersion),
		},
	})
	e := newCoordinated(t, cs, clk)
	ctx, cancel := context.WithTimeout(context.Background(), recvDeadline)
	defer cancel()
	ch := campaignAsync(ctx, e)
	var early *won
	require.Eventually(t, func() bool {
		select {
		case r := <-ch:
			early = &r
			return true
		default:
			return leaseWatches(cs) > 0
		}
	}, 10*time.Second, time.Millisecond, "the campaign neither took the Lease nor waited for it")
	require.Nil(t, early, "a restarted process adopted its predecessor's term at once")

	// The predecessor renews at +2s: the new process times the lease from
	// that renewal.
	clk.SetTime(epoch.Add(2 * time.Second))
	l, err := cs.CoordinationV1().Leases("ns").Get(ctx, "lease", metav1.GetOptions{})
	require.NoError(t, err)
	renewed := metav1.NewMicroTime(acquired.Add(2 * time.Second))
	l.Spec.RenewTime = &renewed
	_, err = cs.CoordinationV1().Leases("ns").Update(ctx, l, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return e.snapshot().rec.RenewTime.Equal(renewed.Time) }, 10*time.Second, time.Millisecond)
	awaitExpiryArmed(t, clk, epoch.Add(5*time.Second))
	clk.SetTime(epoch.Add(5*time.Second - time.Millisecond))
	select {
	case r := <-ch:
		require.FailNow(t, "took the predecessor's lease before it expired", "%+v", r)
	default:
	}

	// Unchanged for the lease duration: the predecessor's term has ended
	// by its own clock too. The new process takes the Lease as a new term.
	clk.SetTime(epoch.Add(5 * time.Second))
	var r won
	select {
	case r = <-ch:
	case <-time.After(10 * time.Second):
		require.FailNow(t, "the expired lease of its own identity was not taken")
	}
	require.NoError(t, r.err)
	require.Equal(t, election.Token(6), r.l.Token()&0xffffffff, "a new transition: leaseTransitions 4 → 5")
	got, err := cs.CoordinationV1().Leases("ns").Get(ctx, "lease", metav1.GetOptions{})
	require.NoError(t, err)
	require.True(t, got.Spec.AcquireTime.Time.Equal(epoch.Add(5*time.Second)), "acquireTime of the new term")
	require.NoError(t, r.l.Resign(ctx))
}

// What the election controller writes when it names a candidate (holder,
// no acquireTime), seen by this process's watch as it happened, is adopted
// at once: the coordinated path stays as quick as before.
func TestCoordinatedAdoptsControllersNamingAtOnce(t *testing.T) {
	for _, before := range []string{"other", ""} {
		t.Run("held by "+strconv.Quote(before), func(t *testing.T) {
			clk := testingclock.NewFakeClock(epoch)
			held := metav1.NewMicroTime(epoch)
			cs := kubefake.Config{Clock: clk}.NewClientset(&coordinationv1.Lease{
				ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "lease"},
				Spec: coordinationv1.LeaseSpec{
					HolderIdentity: ptr.To(before), LeaseDurationSeconds: ptr.To[int32](15),
					AcquireTime: &held, RenewTime: &held, LeaseTransitions: ptr.To[int32](4),
					Strategy: ptr.To(coordinationv1.OldestEmulationVersion),
				},
			})
			e := newCoordinated(t, cs, clk)
			ctx, cancel := context.WithTimeout(context.Background(), recvDeadline)
			defer cancel()
			ch := campaignAsync(ctx, e)
			require.Eventually(t, func() bool { return leaseWatches(cs) > 0 }, 10*time.Second, time.Millisecond, "the campaign did not wait")
			nameCandidate(ctx, t, cs, "pod-0")
			var r won
			select {
			case r = <-ch:
			case <-time.After(10 * time.Second):
				require.FailNow(t, "the controller's naming was not adopted without waiting")
			}
			require.NoError(t, r.err)
			require.Equal(t, election.Token(6), r.l.Token()&0xffffffff)
			require.NoError(t, r.l.Resign(ctx))
		})
	}
}

// nameCandidate writes what the election controller writes when it names
// id after an expired or released term: holder id, no acquireTime, a
// fresh renewTime, leaseDurationSeconds 5.
func nameCandidate(ctx context.Context, t *testing.T, cs *fake.Clientset, id string) {
	t.Helper()
	l, err := cs.CoordinationV1().Leases("ns").Get(ctx, "lease", metav1.GetOptions{})
	require.NoError(t, err)
	now := metav1.NewMicroTime(epoch)
	l.Spec.HolderIdentity, l.Spec.AcquireTime, l.Spec.RenewTime = ptr.To(id), nil, &now
	l.Spec.LeaseDurationSeconds, l.Spec.PreferredHolder = ptr.To[int32](5), nil
	_, err = cs.CoordinationV1().Leases("ns").Update(ctx, l, metav1.UpdateOptions{})
	require.NoError(t, err)
}

// A client-go candidate that holds the Lease under the controller's naming
// keeps its empty acquireTime while it renews, so its term looks like a
// fresh naming. A process of ours started under the same identity (a pod
// restarted under its predecessor's name, the predecessor alive but cut
// off) did not see the naming happen: it treats the term as anybody
// else's, waits while the record changes, and takes the Lease only once it
// has seen it unchanged for the lease duration, with a new transition.
func TestCoordinatedDoesNotAdoptClientGoTermOfItsIdentity(t *testing.T) {
	clk := newArmedClock(epoch)
	renewed := metav1.NewMicroTime(epoch.Add(-time.Minute)) // the holder's clock: ignored
	cs := kubefake.Config{Clock: clk}.NewClientset(&coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "lease"},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity: ptr.To("pod-0"), LeaseDurationSeconds: ptr.To[int32](3),
			RenewTime: &renewed, LeaseTransitions: ptr.To[int32](4),
			Strategy: ptr.To(coordinationv1.OldestEmulationVersion),
		},
	})
	e := newCoordinated(t, cs, clk)
	ctx, cancel := context.WithTimeout(context.Background(), recvDeadline)
	defer cancel()
	ch := campaignAsync(ctx, e)
	var early *won
	require.Eventually(t, func() bool {
		select {
		case r := <-ch:
			early = &r
			return true
		default:
			return leaseWatches(cs) > 0
		}
	}, 10*time.Second, time.Millisecond, "the campaign neither took the Lease nor waited for it")
	require.Nil(t, early, "a new process adopted a client-go term of its identity at once")

	// The client-go holder renews at +2s, keeping the empty acquireTime.
	clk.SetTime(epoch.Add(2 * time.Second))
	l, err := cs.CoordinationV1().Leases("ns").Get(ctx, "lease", metav1.GetOptions{})
	require.NoError(t, err)
	again := metav1.NewMicroTime(renewed.Add(2 * time.Second))
	l.Spec.RenewTime = &again
	_, err = cs.CoordinationV1().Leases("ns").Update(ctx, l, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return e.snapshot().rec.RenewTime.Equal(again.Time) }, 10*time.Second, time.Millisecond)
	awaitExpiryArmed(t, clk, epoch.Add(5*time.Second))
	clk.SetTime(epoch.Add(5*time.Second - time.Millisecond))
	select {
	case r := <-ch:
		require.FailNow(t, "took the client-go holder's lease before it expired", "%+v", r)
	default:
	}

	// Unchanged for the lease duration: the holder's term has ended by its
	// own clock too. The new process takes the Lease as a new term.
	clk.SetTime(epoch.Add(5 * time.Second))
	var r won
	select {
	case r = <-ch:
	case <-time.After(10 * time.Second):
		require.FailNow(t, "the expired lease of its own identity was not taken")
	}
	require.NoError(t, r.err)
	require.Equal(t, election.Token(6), r.l.Token()&0xffffffff, "a new transition: leaseTransitions 4 → 5")
	got, err := cs.CoordinationV1().Leases("ns").Get(ctx, "lease", metav1.GetOptions{})
	require.NoError(t, err)
	require.NotNil(t, got.Spec.AcquireTime, "acquireTime of the new term")
	require.True(t, got.Spec.AcquireTime.Time.Equal(epoch.Add(5*time.Second)), "acquireTime of the new term")
	require.NoError(t, r.l.Resign(ctx))
}
