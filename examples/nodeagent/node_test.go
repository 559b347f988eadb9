package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/reconkit/reconkit/internal/testenv"
	"github.com/reconkit/reconkit/nodestatus"
	"github.com/reconkit/reconkit/versiongate"
)

// The agents' Nodes carry the NoSchedule taint by default, on a real
// apiserver, and the real DaemonSet controller places no pod on them while
// it places one on a Node registered with --taint=false.
func TestNodeTaintKeepsDaemonSetsOff(t *testing.T) {
	opts, err := parseFlags(nil, io.Discard)
	require.NoError(t, err)
	require.True(t, opts.taint, "Nodes must be tainted by default")

	api := testenv.APIServer(t)
	testenv.ControllerManager(t, api, "--controllers=daemonset-controller")
	cfg := api.Config()
	hc, err := rest.HTTPClientFor(cfg)
	require.NoError(t, err)
	defer hc.CloseIdleConnections()
	kube, err := kubernetes.NewForConfigAndClient(cfg, hc)
	require.NoError(t, err)

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	runCtx, stop := context.WithCancel(ctx)
	var g errgroup.Group
	defer func() {
		stop()
		require.NoError(t, g.Wait())
	}()
	// agent-1 as the program registers it by default, agent-2 with
	// --taint=false, through the agent's own Node and controller.
	for i, taint := range []bool{opts.taint, false} {
		node := agentNode(fmt.Sprintf("agent-%d", i+1), i+1, versiongate.Release{Major: 1}, taint,
			gatedCondition(true, "ReconcilerCompatible", "test"))
		nc, err := nodestatus.New(nodeControllerConfig(kube, node, nodestatus.NewProvider(nodestatus.ProviderConfig{}), 4*time.Second))
		require.NoError(t, err)
		g.Go(func() error { return nc.Run(runCtx) })
	}
	ours := corev1.Taint{Key: taintKey, Value: taintValue, Effect: corev1.TaintEffectNoSchedule}
	hasOurs := func(n *corev1.Node) bool {
		return slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool { return t.MatchTaint(&ours) })
	}
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		for _, name := range []string{"agent-1", "agent-2"} {
			n, err := kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if !assert.NoError(c, err) {
				return
			}
			assert.True(c, conditionTrue(n.Status.Conditions, corev1.NodeReady), "%s is not Ready", name)
		}
	}, 2*time.Minute, 100*time.Millisecond, "the two Nodes were not registered Ready")
	n1, err := kube.CoreV1().Nodes().Get(ctx, "agent-1", metav1.GetOptions{})
	require.NoError(t, err)
	require.True(t, hasOurs(n1), "agent-1 has taints %v on the server", n1.Spec.Taints)
	n2, err := kube.CoreV1().Nodes().Get(ctx, "agent-2", metav1.GetOptions{})
	require.NoError(t, err)
	require.False(t, hasOurs(n2), "agent-2 was registered with --taint=false")

	// The ServiceAccount admission plugin needs the namespace's default
	// account, which no controller creates here.
	_, err = kube.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) {
		require.NoError(t, err)
	}
	labels := map[string]string{"app": "everywhere"}
	ds, err := kube.AppsV1().DaemonSets("default").Create(ctx, &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: "everywhere"},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "pause", Image: "registry.k8s.io/pause:3.10"}}},
			},
		},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	// The controller's status counts every Node it judged in one pass, so
	// once it has observed the DaemonSet and created the one pod it wants,
	// its decision about the tainted Node is in too.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		got, err := kube.AppsV1().DaemonSets("default").Get(ctx, ds.Name, metav1.GetOptions{})
		if !assert.NoError(c, err) {
			return
		}
		assert.GreaterOrEqual(c, got.Status.ObservedGeneration, ds.Generation, "not observed yet")
		assert.Equal(c, int32(1), got.Status.DesiredNumberScheduled, "Nodes the DaemonSet wants")
		assert.Equal(c, int32(1), got.Status.CurrentNumberScheduled, "daemon pods created")
	}, 2*time.Minute, 100*time.Millisecond, "the DaemonSet controller did not settle on the untainted Node alone")
	pods, err := kube.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	require.Len(t, pods.Items, 1)
	require.Equal(t, []string{"agent-2"}, affinityNodes(&pods.Items[0]), "the daemon pod is not for the untainted Node")
}

// affinityNodes returns the Node names a daemon pod's required affinity
// pins it to.
func affinityNodes(p *corev1.Pod) []string {
	var out []string
	if p.Spec.Affinity == nil || p.Spec.Affinity.NodeAffinity == nil || p.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return nil
	}
	for _, term := range p.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		for _, f := range term.MatchFields {
			if f.Key == "metadata.name" {
				out = append(out, f.Values...)
			}
		}
	}
	return out
}

func conditionTrue(conds []corev1.NodeCondition, t corev1.NodeConditionType) bool {
	for _, c := range conds {
		if c.Type == t {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
