package main

import (
	"context"
	"io"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"

	"github.com/reconkit/reconkit/backoff"
	"github.com/reconkit/reconkit/election"
	"github.com/reconkit/reconkit/lbrecon"
	"github.com/reconkit/reconkit/lbrecon/lbrecontest"
	"github.com/reconkit/reconkit/versiongate"
)

func TestParseFlags(t *testing.T) {
	o, err := parseFlags(nil, io.Discard)
	require.NoError(t, err)
	require.Equal(t, 3, o.agents)
	require.Empty(t, o.scenario)

	for _, args := range [][]string{
		{"--agents", "1"},
		{"--scenario", "chaos"},
		{"--election-ttl", "1500ms"},
		{"extra"},
	} {
		_, err := parseFlags(args, io.Discard)
		require.Error(t, err, "args %q", args)
	}
}

func TestConfig(t *testing.T) {
	require.NoError(t, validateConfig(localConfig()))

	_, err := parseConfig([]byte(`{"loadBalancer":"lb-1","colour":"blue"}`))
	require.ErrorContains(t, err, "unknown field")

	c := localConfig()
	c.Ports[0].NodePort = 80
	require.ErrorContains(t, validateConfig(c), "outside 30000-32767")

	c = localConfig()
	c.Addresses = []string{"not-an-address"}
	require.ErrorContains(t, validateConfig(c), "not-an-address")

	c = localConfig()
	c.MaxConnections = 0
	require.ErrorContains(t, validateConfig(c), "maxConnections")

	parsed, err := parseConfig([]byte(mustJSON(localConfig())))
	require.NoError(t, err)
	require.Equal(t, localConfig(), parsed)
}

func TestReleasePorts(t *testing.T) {
	v100 := versiongate.Release{Major: 1}
	v110 := versiongate.Release{Major: 1, Minor: 1}
	require.Empty(t, releasePorts(v100))
	require.Equal(t, []portConfig{httpsPort}, releasePorts(v110))
	require.Equal(t, v100, minimumCompatible(v100))
	require.Equal(t, v110, minimumCompatible(versiongate.Release{Major: 1, Minor: 2}))
}

func TestFence(t *testing.T) {
	var f fence
	require.NoError(t, f.admit(5))
	require.NoError(t, f.admit(5))
	require.NoError(t, f.admit(7))
	err := f.admit(6)
	require.ErrorIs(t, err, errFenced)
	require.True(t, backoff.IsPermanent(err), "a stale token must not be retried")
	highest, refused := f.state()
	require.Equal(t, uint64(7), highest)
	require.Equal(t, 1, refused)
}

// A reconcile through the fenced engine converges the load balancer; a
// deposed leader's token is refused afterwards.
func TestFencedReconcile(t *testing.T) {
	ctx := context.Background()
	eng := lbrecontest.New(lbrecontest.Config{})
	var f fence
	lb, err := localConfig().loadBalancer(releasePorts(versiongate.Release{Major: 1, Minor: 1}), []lbrecon.Target{
		{Name: "agent-1", Address: netip.MustParseAddr("10.0.0.1")},
		{Name: "agent-2", Address: netip.MustParseAddr("10.0.0.2")},
	})
	require.NoError(t, err)
	newReconciler := func(token uint64) *lbrecon.LoadBalancerReconciler {
		r, err := lbrecon.NewLoadBalancer(lbrecon.Config{Engine: &fencedEngine{Engine: eng, fence: &f, token: token}, Tag: ownerTag}, lb)
		require.NoError(t, err)
		return r
	}
	require.NoError(t, newReconciler(9).Reconcile(ctx))
	s := summarizeLB(eng.Objects())
	require.Equal(t, []string{"192.0.2.10:443", "192.0.2.10:80"}, s.Binds)
	require.Equal(t, []string{"agent-1", "agent-2"}, s.Targets)
	require.Equal(t, 2+2+2+4, s.Objects)

	// Drift a stale leader would repair: a bind deleted outside (deleting a
	// backend under its servers would be an answer lbrecon refuses to act on).
	objs := eng.Objects()
	eng.Delete(objs[slices.IndexFunc(objs, func(o lbrecon.Object) bool { return o.Kind == lbrecon.KindBind })].ID)
	err = newReconciler(8).Reconcile(ctx)
	require.ErrorIs(t, err, errFenced)
}

func TestProviderNotifiesChanges(t *testing.T) {
	p := newAgentProvider(&corev1.Node{})
	var got []*corev1.Node
	p.NotifyNodeStatus(context.Background(), func(n *corev1.Node) { got = append(got, n) })
	require.Len(t, got, 1, "the current node is handed over at once")

	p.setCondition(gatedCondition(false, "Waiting", "w"))
	p.setCondition(gatedCondition(false, "Waiting", "w")) // only timestamps differ
	p.setCondition(gatedCondition(true, "Compatible", "c"))
	require.Len(t, got, 3)
	require.Len(t, got[2].Status.Conditions, 1)
	require.Equal(t, corev1.ConditionTrue, got[2].Status.Conditions[0].Status)
}

func TestSnapshotLine(t *testing.T) {
	s := snapshot{
		Leader: election.LeaderInfo{Identity: "agent-2", Token: 7},
		Status: "done@1.0.0/min1.0.0",
		LB:     lbSummary{Objects: 6, Binds: []string{"192.0.2.10:80"}, Targets: []string{"agent-1", "agent-2"}},
		Agents: []agentState{
			{Name: "agent-1", Release: "1.0.0", Running: true, Ready: true, Phase: "campaigning", Config: "Local"},
			{Name: "agent-2", Release: "1.0.0", Running: true, Ready: true, Leading: true, Phase: "done", Config: "Local"},
			{Name: "agent-3", Release: "1.0.0", Stopped: "killed"},
		},
		Nodes: map[string]nodeView{
			"agent-1": {Ready: "True/NodeProviderReady", ConfigOK: "True/LocalConfig", Gated: "True/ReconcilerCompatible", LeaseFresh: true, LeaseAge: time.Second},
			"agent-3": {Ready: "True/NodeProviderReady", ConfigOK: "False/TrialProbeFailed", Gated: "True/ReconcilerCompatible"},
		},
	}
	require.Equal(t, "VIEW leader=agent-2#7 status=done@1.0.0/min1.0.0 lb=6obj binds=192.0.2.10:80 targets=agent-1,agent-2"+
		" | agent-1 1.0.0 campaigning ready cfg=Local node=Ready,ConfigOK,Gate"+
		" | agent-2 1.0.0 LEADER/done ready cfg=Local"+
		" | agent-3 1.0.0 KILLED cfg= node=Ready,ConfigOK=False/TrialProbeFailed,Gate,lease-STALE", s.line(false))
}
