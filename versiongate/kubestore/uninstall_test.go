package kubestore_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	k8stesting "k8s.io/client-go/testing"

	"github.com/reconkit/reconkit/internal/testenv"
	"github.com/reconkit/reconkit/kubefake"
	"github.com/reconkit/reconkit/versiongate"
	"github.com/reconkit/reconkit/versiongate/kubestore"
	"github.com/reconkit/reconkit/versiongate/versiongatetest"
)

// Uninstall removes the status Lease's finalizer and the Lease, whether
// the status stands or is being deleted (as every object is while its
// namespace is); an absent status is no error, and a Lease by the
// status' name that is not the gate's is left alone. A server that
// answers every update 409 gets a bounded number of them.
func TestUninstallRemovesTheStatus(t *testing.T) {
	ctx := testCtx(t)
	status := func(t *testing.T, cs kubernetes.Interface, gate string) (*coordinationv1.Lease, error) {
		return cs.CoordinationV1().Leases(testNamespace).Get(ctx, gate+"-status", metav1.GetOptions{})
	}
	t.Run("standing", func(t *testing.T) {
		cs := kubefake.NewClientset()
		writeStatus(t, ctx, cs, "live", 3, statusAt(t, "1.0.0", versiongate.Release{Major: 1}))
		require.NoError(t, newStore(t, cs, "live", nil).Uninstall(ctx))
		_, err := status(t, cs, "live")
		require.True(t, apierrors.IsNotFound(err), "the status Lease is still there: %v", err)
	})
	t.Run("terminating", func(t *testing.T) {
		cs := kubefake.NewClientset()
		writeStatus(t, ctx, cs, "term", 3, statusAt(t, "1.0.0", versiongate.Release{Major: 1}))
		require.NoError(t, cs.CoordinationV1().Leases(testNamespace).Delete(ctx, "term-status", metav1.DeleteOptions{}))
		l, err := status(t, cs, "term")
		require.NoError(t, err, "the finalizer holds a deleted status")
		require.NotNil(t, l.DeletionTimestamp)
		require.NoError(t, newStore(t, cs, "term", nil).Uninstall(ctx))
		_, err = status(t, cs, "term")
		require.True(t, apierrors.IsNotFound(err), "the status Lease is still there: %v", err)
	})
	t.Run("absent", func(t *testing.T) {
		require.NoError(t, newStore(t, kubefake.NewClientset(), "none", nil).Uninstall(ctx))
	})
	t.Run("clash", func(t *testing.T) {
		cs := kubefake.NewClientset()
		_, err := cs.CoordinationV1().Leases(testNamespace).Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{
			Name: "other-status", Finalizers: []string{kubestore.Finalizer}}}, metav1.CreateOptions{})
		require.NoError(t, err)
		require.ErrorContains(t, newStore(t, cs, "other", nil).Uninstall(ctx), "is not gate \"other\"'s status Lease")
		l, err := status(t, cs, "other")
		require.NoError(t, err)
		require.Equal(t, []string{kubestore.Finalizer}, l.Finalizers)
	})
	t.Run("conflicts", func(t *testing.T) {
		srv := kubefake.Config{}.NewServer()
		cs := srv.NewClient().Clientset
		writeStatus(t, ctx, cs, "busy", 3, statusAt(t, "1.0.0", versiongate.Release{Major: 1}))
		var updates int
		srv.Inject(kubefake.Fault{Verb: "update", Answer: func(k8stesting.Action) error {
			updates++
			return apierrors.NewConflict(coordinationv1.Resource("leases"), "busy-status", nil)
		}})
		require.Error(t, newStore(t, cs, "busy", nil).Uninstall(ctx))
		require.LessOrEqual(t, updates, 5, "updates answered 409")
	})
}

// On a real apiserver and controller manager, deleting a gate's namespace
// waits for the status Lease's finalizer (the namespace stays
// Terminating), and Uninstall lets it complete.
func TestUninstallLetsTheNamespaceGo(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a kube-apiserver and kube-controller-manager (internal/testenv); skipped under -short")
	}
	a := testenv.APIServer(t)
	testenv.ControllerManager(t, a, "--controllers=namespace")
	cs := clientFor(t, a.Config())
	ctx := testCtx(t)
	const ns = "uninstall"
	_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	require.NoError(t, err)
	st, err := kubestore.New(kubestore.Config{Client: cs, Namespace: ns, Gate: "gone"})
	require.NoError(t, err)
	term := versiongatetest.NewTerm("uninstaller", 3)
	require.NoError(t, st.Fence(ctx, term))
	b, err := statusAt(t, "1.0.0", versiongate.Release{Major: 1}).Encode()
	require.NoError(t, err)
	require.NoError(t, st.WriteStatus(ctx, term, b, 0))

	require.NoError(t, cs.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}))
	// The namespace controller deletes the Lease, which the finalizer
	// holds, and the namespace waits for it.
	require.Eventually(t, func() bool {
		l, err := cs.CoordinationV1().Leases(ns).Get(ctx, "gone-status", metav1.GetOptions{})
		return err == nil && l.DeletionTimestamp != nil
	}, time.Minute, 100*time.Millisecond, "the namespace controller deleted the status Lease")
	got, err := cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	require.NoError(t, err, "the namespace went with a finalizer on the status Lease")
	require.Equal(t, corev1.NamespaceTerminating, got.Status.Phase)

	require.NoError(t, st.Uninstall(ctx))
	require.Eventually(t, func() bool {
		_, err := cs.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	}, 2*time.Minute, 100*time.Millisecond, "the namespace is deleted once the status is uninstalled")
}
