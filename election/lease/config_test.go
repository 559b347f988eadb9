package lease

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	testingclock "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	"github.com/reconkit/reconkit/election"
	"github.com/reconkit/reconkit/kubefake"
)

// Every configuration New refuses is refused with an error wrapping
// election.ErrInvalidConfig, as election's doc promises of every backend.
func TestNewWrapsErrInvalidConfig(t *testing.T) {
	cs := kubefake.NewClientset()
	ok := func() Config { return Config{Client: cs, Namespace: "ns", Name: "lease", Identity: "a"} }
	for name, mutate := range map[string]func(*Config){
		"no client":          func(c *Config) { c.Client = nil },
		"no namespace":       func(c *Config) { c.Namespace = "" },
		"bad namespace":      func(c *Config) { c.Namespace = "Not_A_Label" },
		"bad name":           func(c *Config) { c.Name = "Not_A_Name" },
		"fractional lease":   func(c *Config) { c.LeaseDuration = 1500 * time.Millisecond },
		"deadline too long":  func(c *Config) { c.LeaseDuration, c.RenewDeadline = 10*time.Second, 10*time.Second },
		"negative takeover":  func(c *Config) { c.TakeoverMargin = -time.Second },
		"coordinated no ver": func(c *Config) { c.Coordinated = &Coordinated{} },
		"coordinated bad id": func(c *Config) { c.Coordinated = &Coordinated{BinaryVersion: "1.0.0"}; c.Identity = "Not A Name" },
	} {
		c := ok()
		mutate(&c)
		_, err := New(c)
		require.ErrorIs(t, err, election.ErrInvalidConfig, name)
	}
	_, err := New(ok())
	require.NoError(t, err)
}

// A preferred holder left on the Lease (after a preemption and a Resign,
// or after a fleet turned Coordinated Leader Election off) does not make an
// uncoordinated candidate yield at its first renewal, which made a new term
// every RetryPeriod: the candidate clears it, as client-go's does.
func TestUncoordinatedClearsLeftoverPreferredHolder(t *testing.T) {
	// In a synctest bubble the elector's real clock is virtual: it moves
	// only once every goroutine waits, so renewals land at their instants
	// however slow the machine, and a fake clock stepped ahead of them
	// cannot end the term.
	synctest.Test(t, func(t *testing.T) {
		clk := testingclock.NewFakeClock(epoch)
		cs := kubefake.NewClientset(&coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "lease"},
			Spec:       coordinationv1.LeaseSpec{PreferredHolder: ptr.To("gone")},
		})
		e, err := New(Config{
			Client: cs, Namespace: "ns", Name: "lease", Identity: "me",
			LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 300 * time.Millisecond,
			Clock: clk,
		})
		require.NoError(t, err)
		defer func() { require.NoError(t, e.Close()) }()
		// A minute of the bubble's time: a Campaign that cannot win fails
		// the test instead of deadlocking the bubble, which aborts the
		// binary.
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		l, err := e.Campaign(ctx)
		require.NoError(t, err)
		got, err := cs.CoordinationV1().Leases("ns").Get(ctx, "lease", metav1.GetOptions{})
		require.NoError(t, err)
		require.Nil(t, got.Spec.PreferredHolder, "after the acquisition")
		lt := l.(*leadership)
		acquired := lt.lastRenew()
		synctest.Wait() // the renewal timer is armed
		for i := range 5 {
			clk.Step(300 * time.Millisecond)
			synctest.Wait()
			require.NoError(t, l.Context().Err(), "the term ended at renewal %d: %v", i+1, context.Cause(l.Context()))
			require.Equal(t, acquired.Add(time.Duration(i+1)*300*time.Millisecond), lt.lastRenew(), "renewal %d", i+1)
		}
		got, err = cs.CoordinationV1().Leases("ns").Get(ctx, "lease", metav1.GetOptions{})
		require.NoError(t, err)
		require.Nil(t, got.Spec.PreferredHolder, "after the renewals")
		require.NoError(t, l.Resign(ctx))
	})
}

// The token carries the Lease's creation second above its transitions:
// a Lease deleted and created again in a later second gives tokens above
// every token of the old one, although its count starts again.
func TestTokenEpochSurvivesLeaseDeletion(t *testing.T) {
	clk := testingclock.NewFakeClock(epoch)
	cs := kubefake.Config{Clock: clk}.NewClientset()
	f := newFakeLease(t, cs, clk)
	ctx, cancel := context.WithTimeout(context.Background(), recvDeadline)
	defer cancel()
	var last election.Token
	for range 3 {
		l, err := f.Campaign(ctx)
		require.NoError(t, err)
		require.Greater(t, l.Token(), last)
		require.Equal(t, election.Token(epoch.Unix()), l.Token()>>32, "the epoch is the creation second")
		last = l.Token()
		require.NoError(t, l.Resign(ctx))
	}
	require.NoError(t, cs.CoordinationV1().Leases("ns").Delete(ctx, "lease", metav1.DeleteOptions{}))
	clk.Step(time.Second)
	l, err := f.Campaign(ctx)
	require.NoError(t, err)
	require.Greater(t, l.Token(), last, "a recreated Lease sent the token back")
	require.Equal(t, election.Token(epoch.Unix()+1), l.Token()>>32, "the new Lease's epoch")
	require.NoError(t, l.Resign(ctx))
}

// A Lease deleted and created again within the same second has the same
// epoch, and its count starts again: a candidate that saw the old Lease
// goes on from the highest token it saw, whether it creates the new Lease
// itself or takes one another writer created.
func TestTokenSurvivesLeaseRecreatedWithinTheSecond(t *testing.T) {
	for _, recreatedBy := range []string{"the candidate", "another writer"} {
		t.Run(recreatedBy, func(t *testing.T) {
			clk := testingclock.NewFakeClock(epoch) // never stepped: one second throughout
			cs := kubefake.Config{Clock: clk}.NewClientset()
			f := newFakeLease(t, cs, clk)
			ctx, cancel := context.WithTimeout(context.Background(), recvDeadline)
			defer cancel()
			var last election.Token
			for range 3 {
				l, err := f.Campaign(ctx)
				require.NoError(t, err)
				last = l.Token()
				require.NoError(t, l.Resign(ctx))
			}
			leases := cs.CoordinationV1().Leases("ns")
			require.NoError(t, leases.Delete(ctx, "lease", metav1.DeleteOptions{}))
			if recreatedBy == "another writer" {
				_, err := leases.Create(ctx, &coordinationv1.Lease{
					ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "lease"},
					Spec:       coordinationv1.LeaseSpec{HolderIdentity: ptr.To(""), LeaseTransitions: ptr.To[int32](0)},
				}, metav1.CreateOptions{})
				require.NoError(t, err)
			}
			l, err := f.Campaign(ctx)
			require.NoError(t, err)
			require.Equal(t, election.Token(epoch.Unix()), l.Token()>>32, "the same epoch")
			require.Greater(t, l.Token(), last, "a Lease recreated within the second sent the token back")
			require.NoError(t, l.Resign(ctx))
		})
	}
}
