package lease_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/reconkit/reconkit/election"
	"github.com/reconkit/reconkit/election/electiontest"
	"github.com/reconkit/reconkit/election/lease"
	"github.com/reconkit/reconkit/internal/testenv"
)

// TestLeaseCoordinatedElection runs two coordinated candidates on a real
// apiserver with Coordinated Leader Election enabled: the newer release,
// alone, is elected; once the older release is a candidate the election
// controller prefers it, the newer holder yields, and the older one leads
// while the newer one campaigns again in vain; once the older one closed
// (its LeaseCandidate deleted and its lease released) the newer one leads.
func TestLeaseCoordinatedElection(t *testing.T) {
	t.Parallel() // waits on lease durations, not the CPU
	a := withCLE.get(t)
	admin := clientset(t, a.Config())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: testNamespace}}, metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) {
		require.NoError(t, err)
	}
	name := uniqueName("cle")
	coordinated := func(id, version string) *lease.Elector {
		e := newLease(t, a.Config(), name, func(c *lease.Config) {
			c.Identity = id
			c.Coordinated = &lease.Coordinated{BinaryVersion: version}
		})
		closeOnCleanup(t, e)
		return e
	}
	newer, older := coordinated("newer", "1.1.0"), coordinated("older", "1.0.0")

	type result struct {
		l   election.Leadership
		err error
	}
	campaign := func(e *lease.Elector) <-chan result {
		ch := make(chan result, 1)
		go func() {
			l, err := e.Campaign(ctx)
			ch <- result{l, err}
		}()
		return ch
	}
	// Alone, the newer release is elected.
	r, _ := receive(t, campaign(newer), "the newer candidate's election")
	require.NoError(t, r.err)
	ln1 := r.l
	require.Equal(t, "newer", ln1.Identity())

	// Once the older release is a candidate too, the controller prefers
	// it: the newer holder's term ends at its next renewal, and its Resign
	// (what Run does) clears the holder, so the controller names the
	// older one. The newer one, campaigning again, is not elected.
	chOlder := campaign(older)
	cause, err := electiontest.WaitTermEnded(ctx, ln1)
	require.NoError(t, err, "the newer holder was not preempted; apiserver log:\n%s", a.Logs(20))
	require.ErrorIs(t, cause, election.ErrLeadershipLost)
	require.ErrorContains(t, cause, "preferred holder")
	require.NoError(t, ln1.Resign(ctx))
	chNewer := campaign(newer)

	var lo election.Leadership
	select {
	case r := <-chOlder:
		require.NoError(t, r.err)
		lo = r.l
	case r := <-chNewer:
		require.FailNow(t, "the newer release was elected again", "%v %v", r.l, r.err)
	case <-ctx.Done():
		require.FailNow(t, "nobody was elected", "apiserver log:\n%s", a.Logs(40))
	}
	require.Equal(t, "older", lo.Identity())
	require.Greater(t, lo.Token(), ln1.Token())
	lse, err := admin.CoordinationV1().Leases(testNamespace).Get(ctx, name, metav1.GetOptions{})
	require.NoError(t, err)
	require.NotNil(t, lse.Spec.Strategy, "the Lease is managed by the election controller")
	require.Equal(t, "older", *lse.Spec.HolderIdentity)

	// A coordinated candidate never takes a released lease by itself: once
	// the older one resigned, the controller names it again (it is still
	// the best candidate, its LeaseCandidate kept until Close), and the
	// waiting newer one has not been elected.
	require.NoError(t, lo.Resign(ctx))
	_, err = electiontest.WaitLeader(ctx, newer, "older")
	require.NoError(t, err, "the controller did not name the older candidate again")
	select {
	case r := <-chNewer:
		require.FailNow(t, "the newer candidate took the released lease by itself", "%v %v", r.l, r.err)
	default:
	}

	// Closing the older candidate deletes its LeaseCandidate and releases
	// the lease; the controller then names the newer one.
	require.NoError(t, older.Close())
	var ln election.Leadership
	select {
	case r := <-chNewer:
		require.NoError(t, r.err)
		ln = r.l
	case <-ctx.Done():
		require.FailNow(t, "the newer candidate was not elected after the older one left", "apiserver log:\n%s", a.Logs(40))
	}
	require.Equal(t, "newer", ln.Identity())
	require.Greater(t, ln.Token(), lo.Token())
	_, err = electiontest.WaitLeader(ctx, newer, "newer")
	require.NoError(t, err)
	require.NoError(t, ln.Resign(ctx))
}

// A process restarted under its predecessor's name (a StatefulSet pod)
// while the predecessor is alive but cut off from the apiserver: the
// election controller names that identity, and the Lease records the
// predecessor's term. While the predecessor renews, the new process never
// leads; once the predecessor is cut off, it takes the Lease only after
// the predecessor's term has ended by the predecessor's own view, with a
// higher token.
func TestLeaseCoordinatedRestartUnderSameName(t *testing.T) {
	t.Parallel() // waits on lease durations, not the CPU
	a := withCLE.get(t)
	admin := clientset(t, a.Config())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: testNamespace}}, metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) {
		require.NoError(t, err)
	}
	name := uniqueName("cle-restart")
	// A 15 s lease renewed every 300 ms: "while the predecessor renews"
	// holds however long a loaded machine delays a renewal (up to 10 s),
	// where the 3 s test lease let one late renewal end the predecessor's
	// term and hand the Lease over during the wait.
	coordinated := func(cfg *rest.Config) *lease.Elector {
		e := newLease(t, cfg, name, func(c *lease.Config) {
			c.Identity = "pod-0"
			c.Coordinated = &lease.Coordinated{BinaryVersion: "1.0.0"}
			c.LeaseDuration, c.RenewDeadline = 15*time.Second, 10*time.Second
		})
		closeOnCleanup(t, e)
		return e
	}
	p := testenv.Proxy(t, a.Addr())
	pred := coordinated(a.ConfigFor(p.Addr()))
	lp, err := pred.Campaign(ctx)
	require.NoError(t, err, "apiserver log:\n%s", a.Logs(20))

	succ := coordinated(a.Config())
	type result struct {
		l   election.Leadership
		err error
	}
	ch := make(chan result, 1)
	go func() {
		l, err := succ.Campaign(ctx)
		ch <- result{l, err}
	}()
	select {
	case r := <-ch:
		require.FailNow(t, "the restarted process took its live predecessor's term", "%v %v", r.l, r.err)
	case <-time.After(2 * testLeaseDuration):
	}
	require.NoError(t, lp.Context().Err(), "the predecessor's term")

	p.Cut()
	var r result
	select {
	case r = <-ch:
	case <-ctx.Done():
		require.FailNow(t, "the restarted process never took the Lease", "apiserver log:\n%s", a.Logs(40))
	}
	now := time.Now()
	require.NoError(t, r.err)
	require.True(t, lp.Context().Err() != nil || !now.Before(lp.(election.Expiring).ValidUntil()),
		"the restarted process led while its predecessor's term was valid by the predecessor's view")
	require.Greater(t, r.l.Token(), lp.Token())
	p.Restore()
	require.NoError(t, r.l.Resign(ctx))
}
