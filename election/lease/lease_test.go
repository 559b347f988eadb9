package lease

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/utils/clock"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/reconkit/reconkit/election"
)

func TestLeaseConfigValidation(t *testing.T) {
	cs := fake.NewClientset()
	ok := Config{Client: cs, Namespace: "ns", Name: "lease"}
	cases := []struct {
		name string
		mod  func(*Config)
	}{
		{"no client", func(c *Config) { c.Client = nil }},
		{"no name", func(c *Config) { c.Name = "" }},
		{"bad namespace", func(c *Config) { c.Namespace = "Not_A_Label" }},
		{"bad name", func(c *Config) { c.Name = "UPPER" }},
		{"fractional lease duration", func(c *Config) { c.LeaseDuration = 2500 * time.Millisecond }},
		{"sub-second lease duration", func(c *Config) {
			c.LeaseDuration, c.RenewDeadline, c.RetryPeriod = 500*time.Millisecond, 400*time.Millisecond, 100*time.Millisecond
		}},
		{"negative renew deadline", func(c *Config) { c.RenewDeadline = -time.Second }},
		{"renew deadline not below lease duration", func(c *Config) { c.RenewDeadline = c.LeaseDuration }},
		{"no skew margin", func(c *Config) { c.LeaseDuration, c.RenewDeadline = 20*time.Second, 19900*time.Millisecond }},
		{"retry period too long", func(c *Config) { c.RetryPeriod = 9 * time.Second }},
		{"negative takeover margin", func(c *Config) { c.TakeoverMargin = -time.Second }},
		{"coordinated without a binary version", func(c *Config) { c.Identity, c.Coordinated = "a", &Coordinated{} }},
		{"coordinated identity not a name", func(c *Config) {
			c.Identity, c.Coordinated = "Not_A_Name", &Coordinated{BinaryVersion: "1.0.0"}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := ok
			c.LeaseDuration, c.RenewDeadline, c.RetryPeriod = DefaultLeaseDuration, DefaultRenewDeadline, DefaultRetryPeriod
			tc.mod(&c)
			e, err := New(c)
			require.Error(t, err)
			require.Nil(t, e)
		})
	}

	e, err := New(ok)
	require.NoError(t, err)
	got := e.Config()
	require.Equal(t, DefaultLeaseDuration, got.LeaseDuration)
	require.Equal(t, DefaultRenewDeadline, got.RenewDeadline)
	require.Equal(t, DefaultRetryPeriod, got.RetryPeriod)
	require.NotEmpty(t, e.Identity())
	require.NotNil(t, got.Clock)
}

// fakeLease is a Elector on a fake clientset and a fake clock.
type fakeLease struct {
	*Elector
	cs    *fake.Clientset
	clock clock.Clock
}

var epoch = time.Unix(1000, 0) // on a second boundary, which the arithmetic below relies on

func newFakeLease(t *testing.T, cs *fake.Clientset, clk clock.Clock) *fakeLease {
	t.Helper()
	e, err := New(Config{
		Client: cs, Namespace: "ns", Name: "lease", Identity: "me",
		LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 300 * time.Millisecond,
		Clock: clk,
	})
	require.NoError(t, err)
	return &fakeLease{Elector: e, cs: cs, clock: clk}
}

// lastRenew returns the renewTime this term last wrote.
func (lt *leadership) lastRenew() time.Time {
	lt.mu.Lock()
	defer lt.mu.Unlock()
	return recordFromSpec(&lt.lease.Spec).RenewTime
}

// TestLeaseValidUntilCountsFromVisibleRenewals steps a fake clock through
// renewals every 300ms: ValidUntil is the start of the first renewal in a
// new second + RenewDeadline, since a client-go follower sees renewals
// only at one-second resolution.
func TestLeaseValidUntilCountsFromVisibleRenewals(t *testing.T) {
	clk := newArmedClock(epoch)
	f := newFakeLease(t, fake.NewClientset(), clk)
	ctx, cancel := context.WithTimeout(context.Background(), recvDeadline)
	defer cancel()
	l, err := f.Campaign(ctx)
	require.NoError(t, err)
	lt := l.(*leadership)
	require.Equal(t, epoch.Add(2*time.Second), lt.ValidUntil(), "after the acquisition")
	require.Equal(t, election.Token(1), l.Token(), "first term on a new Lease")

	want := []struct {
		at         time.Duration // renewal instant after epoch
		validUntil time.Duration
	}{
		{300 * time.Millisecond, 2 * time.Second}, // same second as the acquisition
		{600 * time.Millisecond, 2 * time.Second},
		{900 * time.Millisecond, 2 * time.Second},
		{1200 * time.Millisecond, 3200 * time.Millisecond}, // first renewal in second 1001
		{1500 * time.Millisecond, 3200 * time.Millisecond},
		{1800 * time.Millisecond, 3200 * time.Millisecond},
		{2100 * time.Millisecond, 4100 * time.Millisecond},
	}
	for _, w := range want {
		require.Eventually(t, func() bool { return clk.armedFor(epoch.Add(w.at)) }, 5*time.Second, time.Millisecond, "renewal timer armed for %v", w.at)
		clk.SetTime(epoch.Add(w.at))
		require.Eventually(t, func() bool { return lt.lastRenew().Equal(epoch.Add(w.at)) }, 5*time.Second, time.Millisecond, "renewal at %v", w.at)
		require.Equal(t, epoch.Add(w.validUntil), lt.ValidUntil(), "after the renewal at %v", w.at)
		require.True(t, f.validNow())
	}
	require.NoError(t, l.Resign(ctx))
	require.False(t, f.validNow(), "after Resign")
	lease, err := f.cs.CoordinationV1().Leases("ns").Get(ctx, "lease", metav1.GetOptions{})
	require.NoError(t, err)
	rec := recordFromSpec(&lease.Spec)
	require.Empty(t, rec.Holder, "released")
	require.Equal(t, int32(1), rec.DurationSeconds, "released as client-go does")
}

// TestLeaseTermEndsAtValidUntilWhenRenewalHangs hangs the renewal (the
// apiserver never answers): the gate closes and the term ends exactly at
// ValidUntil.
func TestLeaseTermEndsAtValidUntilWhenRenewalHangs(t *testing.T) {
	clk := newArmedClock(epoch)
	cs := fake.NewClientset()
	var (
		hang    sync.Mutex
		hanging = make(chan struct{})
		unblock = make(chan struct{})
		once    sync.Once
	)
	f := newFakeLease(t, cs, clk)
	ctx, cancel := context.WithTimeout(context.Background(), recvDeadline)
	defer cancel()
	l, err := f.Campaign(ctx)
	require.NoError(t, err)
	cs.PrependReactor("update", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
		hang.Lock()
		defer hang.Unlock()
		once.Do(func() { close(hanging) })
		<-unblock
		return true, nil, errors.New("apiserver gone")
	})
	defer close(unblock) // let the hung renewal return at the end

	require.Eventually(t, func() bool { return clk.armedFor(epoch.Add(300 * time.Millisecond)) }, 5*time.Second, time.Millisecond, "renewal timer armed")
	clk.SetTime(epoch.Add(300 * time.Millisecond))
	recv(t, hanging, "the hanging renewal")
	validUntil := l.(election.Expiring).ValidUntil()
	require.Equal(t, epoch.Add(2*time.Second), validUntil)

	clk.SetTime(validUntil.Add(-time.Nanosecond))
	require.True(t, f.validNow(), "just before ValidUntil")
	require.NoError(t, l.Context().Err())
	clk.SetTime(validUntil)
	require.False(t, f.validNow(), "the gate closes at ValidUntil, watchdog or not")
	recv(t, l.Context().Done(), "the term's end at ValidUntil")
	require.ErrorIs(t, context.Cause(l.Context()), election.ErrLeadershipLost)
	require.ErrorIs(t, context.Cause(l.Context()), errValidityExpired)
}

// TestLeaseFollowerTakesExpiredLeaseAtExpiryInstant: a follower times the
// expiry from its own first sight of the record, restarts that timing on a
// renewal, takes the lease at the expiry instant, and never polls while
// its watch works.
func TestLeaseFollowerTakesExpiredLeaseAtExpiryInstant(t *testing.T) {
	clk := testingclock.NewFakeClock(epoch)
	other, dur, trans := "other", int32(3), int32(4)
	stamp := metav1.NewMicroTime(epoch.Add(-time.Hour)) // another host's clock: ignored
	cs := fake.NewClientset(&coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "lease"},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity: &other, LeaseDurationSeconds: &dur, LeaseTransitions: &trans,
			AcquireTime: &stamp, RenewTime: &stamp,
		},
	})
	f := newFakeLease(t, cs, clk)
	ctx, cancel := context.WithTimeout(context.Background(), recvDeadline)
	defer cancel()
	type result struct {
		l   election.Leadership
		err error
	}
	won := make(chan result, 1)
	go func() {
		l, err := f.Campaign(ctx)
		won <- result{l, err}
	}()
	require.Eventually(t, clk.HasWaiters, 5*time.Second, time.Millisecond, "expiry timer armed")

	// The holder renews at +2s: the expiry moves to +5s.
	clk.SetTime(epoch.Add(2 * time.Second))
	renewed := metav1.NewMicroTime(epoch.Add(-time.Hour + 2*time.Second))
	lease, err := cs.CoordinationV1().Leases("ns").Get(ctx, "lease", metav1.GetOptions{})
	require.NoError(t, err)
	lease.Spec.RenewTime = &renewed
	_, err = cs.CoordinationV1().Leases("ns").Update(ctx, lease, metav1.UpdateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool { return f.snapshot().rec.RenewTime.Equal(renewed.Time) }, 5*time.Second, time.Millisecond, "renewal seen by the watch")

	clk.SetTime(epoch.Add(5*time.Second - time.Millisecond))
	select {
	case r := <-won:
		require.FailNow(t, "took the lease before it expired", "%+v", r)
	default:
	}
	require.Eventually(t, clk.HasWaiters, 5*time.Second, time.Millisecond)
	clk.SetTime(epoch.Add(5 * time.Second))
	// The expiry timer may be armed after the clock got there (the waiter
	// seen above can be another timer): setting the same instant again
	// fires a timer that is due, without moving time past the expiry.
	var r result
	deadline := time.After(time.Minute)
wait:
	for {
		select {
		case r = <-won:
			break wait
		case <-time.After(10 * time.Millisecond):
			clk.SetTime(epoch.Add(5 * time.Second))
		case <-deadline:
			t.Fatal("the follower did not take the expired lease within a minute")
		}
	}
	require.NoError(t, r.err)
	require.Equal(t, election.Token(6), r.l.Token(), "leaseTransitions 4 → 5, token = transitions + 1")
	var lists, watches int
	for _, a := range cs.Actions() {
		if a.GetResource().Resource != "leases" {
			continue
		}
		switch a.GetVerb() {
		case "list":
			lists++
		case "watch":
			watches++
		}
	}
	require.Equal(t, 1, lists, "one list, then the watch: no polling")
	require.Equal(t, 1, watches, "one watch")
	require.NoError(t, r.l.Resign(ctx))
}

// clientGoJSON is what a client-go LeaderElector compares to detect a
// change of the record.
func clientGoJSON(t testing.TB, spec *coordinationv1.LeaseSpec) []byte {
	b, err := json.Marshal(resourcelock.LeaseSpecToLeaderElectionRecord(spec))
	require.NoError(t, err)
	return b
}

func TestLeaseRecordMatchesClientGo(t *testing.T) {
	rec := leaseRecord{
		Holder: "a", DurationSeconds: 15, Transitions: 7,
		AcquireTime: epoch, RenewTime: epoch.Add(1500 * time.Millisecond),
	}
	spec := rec.spec()
	cg := resourcelock.LeaseSpecToLeaderElectionRecord(&spec)
	want := resourcelock.LeaderElectionRecordToLeaseSpec(cg)
	require.Equal(t, want, spec, "same Lease spec as client-go writes")
	require.True(t, recordFromSpec(&spec).equal(rec), "round trip")
	require.Equal(t, election.Token(8), rec.token())
}

func FuzzLeaseRecordKey(f *testing.F) {
	f.Add("a", int32(15), int64(1000e9), int64(1000e9), int32(1), "", int64(300e6), false)
	f.Add("a", int32(15), int64(1000e9), int64(1000.9e9), int32(1), "", int64(300e6), false)
	f.Add("", int32(1), int64(0), int64(-5e8), int32(0), "p", int64(1e9), true)
	f.Fuzz(func(t *testing.T, holder string, dur int32, acq, ren int64, trans int32, pref string, shift int64, newHolder bool) {
		if !utf8.ValidString(holder) || !utf8.ValidString(pref) {
			t.Skip("JSON folds invalid UTF-8; Kubernetes does not store it")
		}
		// Keep times within the years JSON's RFC 3339 can encode.
		const span = int64(200 * 365 * 24 * time.Hour)
		acq, ren, shift = acq%span, ren%span, shift%int64(10*time.Second)
		a := leaseRecord{
			Holder: holder, DurationSeconds: dur, Transitions: trans, PreferredHolder: pref,
			AcquireTime: time.Unix(0, acq), RenewTime: time.Unix(0, ren),
		}
		b := a
		b.RenewTime = b.RenewTime.Add(time.Duration(shift))
		if newHolder {
			b.Holder += "x"
		}
		sa, sb := a.spec(), b.spec()
		ra, rb := recordFromSpec(&sa), recordFromSpec(&sb)
		require.True(t, ra.equal(a))
		sameForClientGo := bytes.Equal(clientGoJSON(t, &sa), clientGoJSON(t, &sb))
		require.Equal(t, sameForClientGo, ra.clientGoKey() == rb.clientGoKey(), "records %+v and %+v", ra, rb)
	})
}

// A Lease marked by the apiserver's election controller (Coordinated Leader
// Election) keeps its Strategy and PreferredHolder through our writes, and
// a leader yields when another holder is preferred: its term ends, and its
// Resign clears holderIdentity with those fields kept.
func TestLeaseKeepsCLEFieldsAndYieldsToPreferredHolder(t *testing.T) {
	clk := newArmedClock(epoch)
	cs := fake.NewClientset()
	strategy := coordinationv1.OldestEmulationVersion
	_, err := cs.CoordinationV1().Leases("ns").Create(context.Background(), &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "lease"},
		Spec:       coordinationv1.LeaseSpec{Strategy: &strategy},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	f := newFakeLease(t, cs, clk)
	ctx, cancel := context.WithTimeout(context.Background(), recvDeadline)
	defer cancel()
	l, err := f.Campaign(ctx)
	require.NoError(t, err)
	lease, err := cs.CoordinationV1().Leases("ns").Get(ctx, "lease", metav1.GetOptions{})
	require.NoError(t, err)
	require.NotNil(t, lease.Spec.Strategy, "acquisition dropped Strategy")
	require.Equal(t, strategy, *lease.Spec.Strategy)

	// The election controller names another preferred holder.
	other := "newer-candidate"
	lease.Spec.PreferredHolder = &other
	_, err = cs.CoordinationV1().Leases("ns").Update(ctx, lease, metav1.UpdateOptions{})
	require.NoError(t, err)
	// The fake keeps no resourceVersion, so answer the next renewal with
	// the conflict the real apiserver sends after the controller's write.
	var conflicted atomic.Bool
	cs.PrependReactor("update", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
		if conflicted.CompareAndSwap(false, true) {
			return true, nil, apierrors.NewConflict(coordinationv1.Resource("leases"), "lease", errors.New("modified"))
		}
		return false, nil, nil
	})
	require.Eventually(t, func() bool { return clk.armedFor(epoch.Add(300 * time.Millisecond)) }, 5*time.Second, time.Millisecond, "renewal timer armed")
	clk.Step(time.Second) // the next renewal
	select {
	case <-l.Context().Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the leader did not yield to the preferred holder")
	}
	require.ErrorIs(t, context.Cause(l.Context()), election.ErrLeadershipLost)
	require.ErrorIs(t, context.Cause(l.Context()), errPreempted)
	require.False(t, f.Leading())

	require.NoError(t, l.Resign(ctx))
	lease, err = cs.CoordinationV1().Leases("ns").Get(ctx, "lease", metav1.GetOptions{})
	require.NoError(t, err)
	require.Empty(t, recordFromSpec(&lease.Spec).Holder, "Resign after a preemption releases")
	require.NotNil(t, lease.Spec.Strategy)
	require.NotNil(t, lease.Spec.PreferredHolder)
	require.Equal(t, other, *lease.Spec.PreferredHolder)
}

// Resign writes the release client-go's ReleaseOnCancel writes: no holder
// and leaseDurationSeconds 1, so that any follower, ours or client-go's,
// takes the Lease at once.
func TestResignClearsHolderWithDurationOne(t *testing.T) {
	clk := testingclock.NewFakeClock(epoch)
	cs := fake.NewClientset()
	f := newFakeLease(t, cs, clk)
	closeOnCleanup(t, f)
	ctx, cancel := context.WithTimeout(context.Background(), recvDeadline)
	defer cancel()
	l, err := f.Campaign(ctx)
	require.NoError(t, err)
	require.NoError(t, l.Resign(ctx))
	got, err := cs.CoordinationV1().Leases("ns").Get(ctx, "lease", metav1.GetOptions{})
	require.NoError(t, err)
	require.Empty(t, ptr.Deref(got.Spec.HolderIdentity, ""), "holderIdentity after Resign")
	require.Equal(t, int32(1), ptr.Deref(got.Spec.LeaseDurationSeconds, 0), "leaseDurationSeconds after Resign")
}

// A released Lease (no holder, leaseDurationSeconds 1, as a Resign writes
// it) is taken at once whatever the TakeoverMargin: the margin covers a
// holder that may still act, and a released Lease has none. The fake clock
// never moves, so only a candidate that takes it at once leads.
func TestLeaseReleasedIsTakenAtOnceWhateverTheMargin(t *testing.T) {
	clk := testingclock.NewFakeClock(epoch)
	dur, trans := int32(1), int32(4)
	stamp := metav1.NewMicroTime(epoch)
	cs := fake.NewClientset(&coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "lease"},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity: ptr.To(""), LeaseDurationSeconds: &dur, LeaseTransitions: &trans,
			AcquireTime: &stamp, RenewTime: &stamp,
		},
	})
	e, err := New(Config{
		Client: cs, Namespace: "ns", Name: "lease", Identity: "me",
		LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 300 * time.Millisecond,
		TakeoverMargin: 10 * time.Second, Clock: clk,
	})
	require.NoError(t, err)
	closeOnCleanup(t, e)
	ctx, cancel := context.WithTimeout(context.Background(), recvDeadline)
	defer cancel()
	l, err := e.Campaign(ctx)
	require.NoError(t, err, "the released Lease was not taken while the clock stood still")
	require.NoError(t, l.Resign(ctx))
}
