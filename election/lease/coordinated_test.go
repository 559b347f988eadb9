package lease

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	coordinationv1beta1 "k8s.io/api/coordination/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/reconkit/reconkit/kubefake"
)

// newCoordinatedIn is a coordinated candidate "pod-0" on cs, on the
// bubble's clock.
func newCoordinatedIn(t *testing.T, cs *fake.Clientset) *Elector {
	t.Helper()
	e, err := New(Config{
		Client: cs, Namespace: "ns", Name: "lease", Identity: "pod-0",
		LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 300 * time.Millisecond,
		Clock: clock.RealClock{}, Coordinated: &Coordinated{BinaryVersion: "1.4.2"},
	})
	require.NoError(t, err)
	return e
}

// A Lease that names this candidate as holder but another preferred
// holder (the election controller ended that term and picked somebody
// else) is never taken, not even once it expired: the controller's choice
// is followed.
func TestCoordinatedNeverTakesALeaseWhileAnotherIsPreferred(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		acquired := metav1.NewMicroTime(time.Now().Add(-time.Minute))
		cs := kubefake.Config{}.NewClientset(&coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "lease"},
			Spec: coordinationv1.LeaseSpec{
				HolderIdentity: ptr.To("pod-0"), LeaseDurationSeconds: ptr.To[int32](3),
				AcquireTime: &acquired, RenewTime: &acquired, LeaseTransitions: ptr.To[int32](4),
				Strategy:        ptr.To(coordinationv1.OldestEmulationVersion),
				PreferredHolder: ptr.To("other"),
			},
		})
		e := newCoordinatedIn(t, cs)
		defer func() { _ = e.Close() }()
		ctx, cancel := context.WithCancel(context.Background())
		ch := campaignAsync(ctx, e)
		time.Sleep(time.Minute) // twenty lease durations
		synctest.Wait()
		select {
		case r := <-ch:
			require.FailNow(t, "took a Lease the controller prefers another holder for", "%+v", r)
		default:
		}
		got, err := cs.CoordinationV1().Leases("ns").Get(ctx, "lease", metav1.GetOptions{})
		require.NoError(t, err)
		require.Equal(t, int32(4), *got.Spec.LeaseTransitions, "the Lease was written")
		cancel()
		r := <-ch
		require.Error(t, r.err)
	})
}

// The LeaseCandidate is published with this candidate's versions and the
// defaults filled in, renewed when the election controller pings it and
// at least every five minutes, published again when deleted, and deleted
// on Close.
func TestCoordinatedKeepsItsLeaseCandidate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cs := kubefake.Config{}.NewClientset()
		e := newCoordinatedIn(t, cs)
		defer func() { _ = e.Close() }() // idempotent; ends the bubble's goroutines on a failure
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		ch := campaignAsync(ctx, e)
		cands := cs.CoordinationV1beta1().LeaseCandidates("ns")
		get := func() *coordinationv1beta1.LeaseCandidate {
			t.Helper()
			synctest.Wait()
			lc, err := cands.Get(ctx, "pod-0", metav1.GetOptions{})
			require.NoError(t, err, "the LeaseCandidate")
			return lc
		}
		lc := get()
		require.Equal(t, "lease", lc.Spec.LeaseName)
		require.Equal(t, "1.4.2", lc.Spec.BinaryVersion)
		require.Equal(t, "1.4.2", lc.Spec.EmulationVersion, "EmulationVersion defaults to BinaryVersion")
		require.Equal(t, coordinationv1.OldestEmulationVersion, lc.Spec.Strategy)
		require.NotNil(t, lc.Spec.RenewTime)
		first := lc.Spec.RenewTime.Time

		// The controller pings: renewed at once, the ping kept.
		time.Sleep(time.Second)
		ping := metav1.NewMicroTime(time.Now())
		lc.Spec.PingTime = &ping
		_, err := cands.Update(ctx, lc, metav1.UpdateOptions{})
		require.NoError(t, err)
		lc = get()
		require.True(t, lc.Spec.RenewTime.After(first), "not renewed after a ping")
		require.False(t, lc.Spec.RenewTime.Before(&ping), "renewTime before the ping")
		require.NotNil(t, lc.Spec.PingTime, "the ping dropped")
		pinged := lc.Spec.RenewTime.Time

		// No ping: renewed within five minutes, and not before.
		time.Sleep(candidateRenewInterval - time.Second)
		require.True(t, get().Spec.RenewTime.Time.Equal(pinged), "renewed without a ping before five minutes")
		time.Sleep(time.Second)
		require.True(t, get().Spec.RenewTime.After(pinged), "not renewed within five minutes")

		// Deleted (by the apiserver's garbage collector): published again.
		require.NoError(t, cands.Delete(ctx, "pod-0", metav1.DeleteOptions{}))
		get()

		// Close deletes it.
		require.NoError(t, e.Close())
		_, err = cands.Get(ctx, "pod-0", metav1.GetOptions{})
		require.True(t, apierrors.IsNotFound(err), "LeaseCandidate left after Close: %v", err)
		<-ch
	})
}

// A coordinated candidate keeps the preferredHolder the election
// controller wrote, through the write that adopts the Lease and through
// its renewals (an uncoordinated one clears it), and yields when the
// controller prefers another holder; its Resign then releases with the
// controller's fields kept.
func TestCoordinatedKeepsPreferredHolderAndYields(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		now := metav1.NewMicroTime(time.Now())
		cs := kubefake.Config{}.NewClientset(&coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "lease"},
			Spec: coordinationv1.LeaseSpec{
				HolderIdentity: ptr.To("other"), LeaseDurationSeconds: ptr.To[int32](15),
				AcquireTime: &now, RenewTime: &now, LeaseTransitions: ptr.To[int32](4),
				Strategy: ptr.To(coordinationv1.OldestEmulationVersion),
			},
		})
		e := newCoordinatedIn(t, cs)
		defer func() { _ = e.Close() }()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		leases := cs.CoordinationV1().Leases("ns")
		ch := campaignAsync(ctx, e)
		synctest.Wait()

		// The controller names pod-0, marking it preferred as well.
		l, err := leases.Get(ctx, "lease", metav1.GetOptions{})
		require.NoError(t, err)
		named := metav1.NewMicroTime(time.Now())
		l.Spec.HolderIdentity, l.Spec.AcquireTime, l.Spec.RenewTime = ptr.To("pod-0"), nil, &named
		l.Spec.LeaseDurationSeconds, l.Spec.PreferredHolder = ptr.To[int32](5), ptr.To("pod-0")
		_, err = leases.Update(ctx, l, metav1.UpdateOptions{})
		require.NoError(t, err)
		r := <-ch
		require.NoError(t, r.err, "the controller's naming adopted")
		preferred := func() string {
			t.Helper()
			l, err := leases.Get(ctx, "lease", metav1.GetOptions{})
			require.NoError(t, err)
			return recordFromLease(l).PreferredHolder
		}
		require.Equal(t, "pod-0", preferred(), "the adopting write dropped preferredHolder")
		time.Sleep(time.Second) // three renewals
		synctest.Wait()
		l, err = leases.Get(ctx, "lease", metav1.GetOptions{})
		require.NoError(t, err)
		require.True(t, recordFromLease(l).RenewTime.After(named.Time), "no renewal in a second")
		require.Equal(t, "pod-0", preferred(), "a renewal dropped preferredHolder")
		require.NoError(t, r.l.Context().Err(), "the term ended while preferred")

		// The controller prefers another: the term ends as preempted.
		l.Spec.PreferredHolder = ptr.To("next")
		_, err = leases.Update(ctx, l, metav1.UpdateOptions{})
		require.NoError(t, err)
		time.Sleep(time.Second)
		synctest.Wait()
		require.ErrorIs(t, context.Cause(r.l.Context()), errPreempted, "did not yield to the preferred holder")
		require.NoError(t, r.l.Resign(ctx))
		l, err = leases.Get(ctx, "lease", metav1.GetOptions{})
		require.NoError(t, err)
		rec := recordFromLease(l)
		require.Empty(t, rec.Holder, "Resign after a preemption releases")
		require.Equal(t, "next", rec.PreferredHolder)
		require.NotNil(t, l.Spec.Strategy)
	})
}

// Only the naming this process's watch saw happen is adopted at once: a
// later naming of its identity that it did not see happen (written while
// it was not campaigning, so first seen by a read) is any other holder's
// term, taken only once it expired by this candidate's clock.
func TestCoordinatedAdoptsOnlyTheNamingItWitnessed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		now := metav1.NewMicroTime(time.Now())
		cs := kubefake.Config{}.NewClientset(&coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "lease"},
			Spec: coordinationv1.LeaseSpec{
				HolderIdentity: ptr.To("other"), LeaseDurationSeconds: ptr.To[int32](15),
				AcquireTime: &now, RenewTime: &now, LeaseTransitions: ptr.To[int32](4),
				Strategy: ptr.To(coordinationv1.OldestEmulationVersion),
			},
		})
		e := newCoordinatedIn(t, cs)
		defer func() { _ = e.Close() }()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		leases := cs.CoordinationV1().Leases("ns")
		name := func() {
			t.Helper()
			l, err := leases.Get(ctx, "lease", metav1.GetOptions{})
			require.NoError(t, err)
			at := metav1.NewMicroTime(time.Now())
			l.Spec.HolderIdentity, l.Spec.AcquireTime, l.Spec.RenewTime = ptr.To("pod-0"), nil, &at
			l.Spec.LeaseDurationSeconds, l.Spec.PreferredHolder = ptr.To[int32](5), nil
			_, err = leases.Update(ctx, l, metav1.UpdateOptions{})
			require.NoError(t, err)
		}

		// Witnessed: adopted at once.
		ch := campaignAsync(ctx, e)
		synctest.Wait()
		name()
		r := <-ch
		require.NoError(t, r.err)
		require.NoError(t, r.l.Resign(ctx))

		// Named again while nobody here followed the Lease.
		name()
		ch = campaignAsync(ctx, e)
		time.Sleep(5*time.Second - time.Millisecond)
		synctest.Wait()
		select {
		case r := <-ch:
			require.FailNow(t, "adopted a naming it did not see happen", "%+v", r)
		default:
		}
		time.Sleep(time.Millisecond)
		r = <-ch
		require.NoError(t, r.err, "the expired term of its identity")
		l, err := leases.Get(ctx, "lease", metav1.GetOptions{})
		require.NoError(t, err)
		require.NotNil(t, l.Spec.AcquireTime, "taken as a new term")
		require.NoError(t, r.l.Resign(ctx))
	})
}
