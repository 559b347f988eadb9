package reconkit_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/reconkit/reconkit/election"
	"github.com/reconkit/reconkit/election/lease"
	"github.com/reconkit/reconkit/internal/testenv"
	"github.com/reconkit/reconkit/lbrecon"
	"github.com/reconkit/reconkit/lbrecon/lbrecontest"
	"github.com/reconkit/reconkit/versiongate"
	"github.com/reconkit/reconkit/versiongate/etcdstore"
)

// An operator deletes a stuck controller's Lease, a common remedy. The
// next leader's token is still above every token of the Lease before it,
// so the fences that keep the highest token they have seen (versiongate's
// fence key on etcd, lbrecon's Guard with a Fence) accept the new leader's
// writes and still refuse the old leader's, with no operator step.
func TestLeaseDeletedFencesAcceptTheNextLeader(t *testing.T) {
	a := testenv.APIServer(t)
	cli := testenv.Etcd(t).Client(t)
	cs, err := kubernetes.NewForConfig(a.Config())
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const ns, name = "fencing", "agents-leader"
	_, err = cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) {
		require.NoError(t, err)
	}
	newElector := func(id string) *lease.Elector {
		e, err := lease.New(lease.Config{
			Client: cs, Namespace: ns, Name: name, Identity: id,
			LeaseDuration: 4 * time.Second, RenewDeadline: 3 * time.Second, RetryPeriod: 500 * time.Millisecond,
		})
		require.NoError(t, err)
		t.Cleanup(func() { _ = e.Close() })
		return e
	}

	store, err := etcdstore.New(cli, etcdstore.Config{StatusKey: "/fencing/status", NodesPrefix: "/fencing/nodes/"})
	require.NoError(t, err)
	fence := lbrecon.NewFence("agents load balancer", 0, "restart the agents")
	engine := lbrecon.Guard(lbrecontest.New(lbrecontest.Config{}), lbrecon.CheckToken(fence.Admit))
	write := func(l election.Leadership, what string) (statusErr, lbErr error) {
		statusErr = store.Fence(ctx, l)
		if statusErr == nil {
			statusErr = store.WriteStatus(ctx, l, []byte(what), 0)
		}
		_, lbErr = engine.Create(lbrecon.WithToken(ctx, l.Token()), lbrecon.Object{
			Kind: lbrecon.KindBackend, Name: what, Tags: []string{"owner=agents"}, Spec: lbrecon.BackendSpec{LoadBalancer: "lb-1"},
		})
		return statusErr, lbErr
	}

	// The old leader's Lease has seen several transitions, so a count that
	// started again would give the next leader a lower token.
	old := newElector("agent-a")
	var l election.Leadership
	for i := range 3 {
		l, err = old.Campaign(ctx)
		require.NoError(t, err)
		statusErr, lbErr := write(l, fmt.Sprintf("a-%d", i))
		require.NoError(t, statusErr)
		require.NoError(t, lbErr)
		if i < 2 {
			require.NoError(t, l.Resign(ctx))
		}
	}
	stale := l // the old leader's last term; it never resigns

	gone, err := cs.CoordinationV1().Leases(ns).Get(ctx, name, metav1.GetOptions{})
	require.NoError(t, err)
	require.NoError(t, cs.CoordinationV1().Leases(ns).Delete(ctx, name, metav1.DeleteOptions{}))
	// The old holder notices at its next renewal and its term ends.
	select {
	case <-stale.Context().Done():
	case <-ctx.Done():
		t.Fatal("the old leader's term did not end after its Lease was deleted")
	}

	// The next leader here is a process started after the delete, which
	// has seen no earlier token: its guarantee rests on the apiserver
	// creating the new Lease in a later second than the old one (see
	// election/lease's doc), so wait for that second to begin.
	require.Eventually(t, func() bool { return time.Now().Unix() > gone.CreationTimestamp.Unix() }, 5*time.Second, 10*time.Millisecond)
	next := newElector("agent-b")
	nl, err := next.Campaign(ctx)
	require.NoError(t, err)
	created, err := cs.CoordinationV1().Leases(ns).Get(ctx, name, metav1.GetOptions{})
	require.NoError(t, err)
	require.NotEqual(t, gone.UID, created.UID, "a new Lease object")
	require.Greater(t, nl.Token(), stale.Token(), "the new Lease's token is above every token of the deleted one")

	statusErr, lbErr := write(nl, "b-0")
	require.NoError(t, statusErr, "versiongate's fence accepts the new leader with no operator step")
	require.NoError(t, lbErr, "lbrecon's fence accepts the new leader with no operator step")
	st, err := store.ReadStatus(ctx)
	require.NoError(t, err)
	require.Equal(t, "b-0", string(st.Value))

	// The deposed leader, paused across all this, writes again.
	statusErr = store.WriteStatus(ctx, stale, []byte("a-late"), 0)
	require.ErrorIs(t, statusErr, versiongate.ErrLeadershipLost)
	_, lbErr = engine.Create(lbrecon.WithToken(ctx, stale.Token()), lbrecon.Object{
		Kind: lbrecon.KindBackend, Name: "a-late", Tags: []string{"owner=agents"}, Spec: lbrecon.BackendSpec{LoadBalancer: "lb-1"},
	})
	var fe *lbrecon.FenceError
	require.True(t, errors.As(lbErr, &fe), "got %v", lbErr)
	require.Equal(t, nl.Token(), fe.Stored)
	require.Equal(t, stale.Token(), fe.Token)
	st, err = store.ReadStatus(ctx)
	require.NoError(t, err)
	require.Equal(t, "b-0", string(st.Value), "the deposed leader's status write did not land")
	require.NoError(t, nl.Resign(ctx))
}
