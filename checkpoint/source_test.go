package checkpoint_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/reconkit/reconkit/checkpoint"
	"github.com/reconkit/reconkit/internal/testenv"
)

func TestConfigMapSourceFake(t *testing.T) {
	ctx := context.Background()
	cs := fake.NewClientset(&corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "agent", UID: types.UID("3f2a"), ResourceVersion: "41"},
		Data:       map[string]string{"config": "level=4"},
		BinaryData: map[string][]byte{"bin": []byte("level=5")},
	})
	s := &checkpoint.ConfigMapSource{Client: cs, Namespace: "kube-system", Name: "agent", Key: "config"}
	payload, src, err := s.Fetch(ctx)
	require.NoError(t, err)
	require.Equal(t, "level=4", string(payload))
	require.Equal(t, checkpoint.Source{UID: "3f2a", ResourceVersion: "41", Origin: "configmap kube-system/agent key config"}, src)
	id, err := src.ID()
	require.NoError(t, err)
	require.Equal(t, "3f2a_41", id)

	s.Key = "bin"
	payload, _, err = s.Fetch(ctx)
	require.NoError(t, err)
	require.Equal(t, "level=5", string(payload))

	s.Key = "nope"
	_, _, err = s.Fetch(ctx)
	require.ErrorContains(t, err, "key missing")

	s.Key, s.Name = "config", "absent"
	_, _, err = s.Fetch(ctx)
	require.ErrorIs(t, err, checkpoint.ErrNotFound)

	_, _, err = (&checkpoint.ConfigMapSource{}).Fetch(ctx)
	require.ErrorContains(t, err, "needs Client")
}

// TestConfigMapSourceAPIServer drives the source and a Controller against a
// real kube-apiserver, where UIDs and resourceVersions are the server's.
func TestConfigMapSourceAPIServer(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a real kube-apiserver; skipped under -short")
	}
	ctx := context.Background()
	a := testenv.APIServer(t)
	cs, err := kubernetes.NewForConfig(a.Config())
	require.NoError(t, err)
	cms := cs.CoreV1().ConfigMaps("default")
	cm, err := cms.Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "agent"},
		Data:       map[string]string{"config": "level=4"},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	s := &checkpoint.ConfigMapSource{Client: cs, Namespace: "default", Name: "agent", Key: "config"}
	payload, src, err := s.Fetch(ctx)
	require.NoError(t, err)
	require.Equal(t, "level=4", string(payload))
	require.Equal(t, string(cm.UID), src.UID)
	require.Equal(t, cm.ResourceVersion, src.ResourceVersion)

	clk := clocktesting.NewFakeClock(t0)
	ctrl, err := checkpoint.New(checkpoint.Config[agentConfig]{
		Store: newFS(t, t.TempDir()+"/store", 0), Parse: parseAgent, Validate: validateAgent,
		Local: agentConfig{Level: 1}, TrialDuration: trial, CheckInterval: interval,
		Source: s, SourceInterval: interval, Clock: clk,
	})
	require.NoError(t, err)
	_, err = ctrl.Bootstrap(ctx)
	require.NoError(t, err)
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- ctrl.Run(runCtx) }()
	defer func() {
		cancel()
		require.ErrorIs(t, <-done, context.Canceled)
	}()
	firstID := string(cm.UID) + "_" + cm.ResourceVersion
	require.Eventually(t, func() bool { return ctrl.Status().ID == firstID }, 2*time.Minute, 5*time.Millisecond) // generous: a slow, busy machine
	require.Equal(t, checkpoint.PhaseTrial, ctrl.Status().Phase)

	// An update is a new resourceVersion, hence a new checkpoint.
	cm.Data["config"] = "level=6"
	cm, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
	require.NoError(t, err)
	secondID := string(cm.UID) + "_" + cm.ResourceVersion
	require.NotEqual(t, firstID, secondID)
	require.Eventually(t, func() bool {
		if clk.HasWaiters() {
			clk.Step(interval)
		}
		return ctrl.Status().ID == secondID
	}, 2*time.Minute, 5*time.Millisecond) // generous: a slow, busy machine
	require.Equal(t, 6, ctrl.Status().Config.Level)
}
