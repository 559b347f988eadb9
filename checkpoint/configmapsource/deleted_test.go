package configmapsource_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/reconkit/reconkit/checkpoint"
	"github.com/reconkit/reconkit/checkpoint/configmapsource"
	"github.com/reconkit/reconkit/internal/testenv"
	"github.com/reconkit/reconkit/kubefake"
)

// The ConfigMap deleted by an operator while its configuration is on
// trial: the trial goes on and passes (a deletion assigns nothing and
// rolls nothing back), the source sends no request for it (the deletion
// arrives on the open watch, which stays open), and the ConfigMap created
// again is assigned and put on trial at once.
func TestConfigMapDeletedMidTrial(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv := kubefake.Config{}.NewServer()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		deletedMidTrial(t, ctx, srv.NewClient(), srv.NewClient(), "kube-system", time.Minute)
	})
}

// TestConfigMapDeletedMidTrial on a real apiserver, whose deletions,
// watches and resourceVersions are the real ones.
func TestConfigMapDeletedMidTrialAPIServer(t *testing.T) {
	if testing.Short() {
		t.Skip("needs a kube-apiserver (internal/testenv); skipped under -short")
	}
	a := testenv.APIServer(t)
	cs, err := kubernetes.NewForConfig(a.Config())
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	deletedMidTrial(t, ctx, cs, cs, "default", 5*time.Second)
}

// deletedMidTrial runs a Controller fed by a Source on cs, with trials of
// trial, through the deletion of its ConfigMap by op mid-trial.
func deletedMidTrial(t *testing.T, ctx context.Context, cs, op kubernetes.Interface, ns string, trial time.Duration) {
	cms := op.CoreV1().ConfigMaps(ns)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "agent", Namespace: ns}, Data: map[string]string{"config": "workers=2"}}
	_, err := cms.Create(ctx, cm, metav1.CreateOptions{})
	require.NoError(t, err)
	var lists, watches atomic.Int64
	// watching is closed when the source asks for its first watch. The
	// source delivers the listed ConfigMap (which starts the trial) before
	// it asks, so the counts are read only once it has: read at the trial's
	// start alone, a watch still on its way would count against the delete.
	watching := make(chan struct{})
	var once sync.Once
	src, err := configmapsource.New(configmapsource.Config{Client: cs, Namespace: ns, Name: "agent", Key: "config",
		OnRequest: func(verb string) {
			if verb == "list" {
				lists.Add(1)
			} else {
				watches.Add(1)
				once.Do(func() { close(watching) })
			}
		}})
	require.NoError(t, err)
	ctrl, err := checkpoint.New(checkpoint.Config[string]{
		Store:         &checkpoint.MemStore{},
		Parse:         func(b []byte) (string, error) { return string(b), nil },
		Validate:      func(string) error { return nil },
		Local:         "local",
		TrialDuration: trial,
		CheckInterval: trial / 10,
		Source:        src,
	})
	require.NoError(t, err)
	_, err = ctrl.Bootstrap(ctx)
	require.NoError(t, err)
	rctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = ctrl.Run(rctx) }()
	defer func() { stop(); wg.Wait() }()

	st, err := ctrl.WaitFor(ctx, func(s checkpoint.Status[string]) bool { return s.Phase == checkpoint.PhaseTrial })
	require.NoError(t, err)
	require.Equal(t, "workers=2", st.Config)
	id := st.ID
	select {
	case <-watching:
	case <-ctx.Done():
		t.Fatalf("the source never asked for a watch: %v", ctx.Err())
	}
	l, w := lists.Load(), watches.Load()
	require.NoError(t, cms.Delete(ctx, "agent", metav1.DeleteOptions{}))
	deleted := time.Now()

	st, err = ctrl.WaitFor(ctx, func(s checkpoint.Status[string]) bool { return s.Phase != checkpoint.PhaseTrial })
	require.NoError(t, err)
	t.Logf("the trial ended %v after the delete: %s %s; requests since: %d lists, %d watches", time.Since(deleted), st.Phase, st.ID, lists.Load()-l, watches.Load()-w)
	require.Equal(t, checkpoint.PhaseLastKnownGood, st.Phase, "the deletion ended the trial otherwise than by passing it")
	require.Equal(t, id, st.ID)
	require.Equal(t, "workers=2", st.Config)
	require.Equal(t, l, lists.Load(), "the deletion cost a list")
	require.Equal(t, w, watches.Load(), "the deletion cost a watch")

	cm.Data["config"] = "workers=3"
	_, err = cms.Create(ctx, cm, metav1.CreateOptions{})
	require.NoError(t, err)
	st, err = ctrl.WaitFor(ctx, func(s checkpoint.Status[string]) bool {
		return s.Phase == checkpoint.PhaseTrial && s.Config == "workers=3"
	})
	require.NoError(t, err, "the ConfigMap created again was not assigned")
	require.NotEqual(t, id, st.ID)
}
