package main

import (
	"context"
	"go/parser"
	"go/token"
	"io"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

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
	require.Equal(t, kubeLocal, o.kubeMode(), "a real apiserver by default")
	require.True(t, o.taint, "tainted Nodes by default")
	require.Equal(t, storeKube, o.store, "no etcd for the agents by default")

	o, err = parseFlags([]string{"--store", "etcd", "--etcd", "127.0.0.1:2379", "--kube", "memory", "--scenario", "fence"}, io.Discard)
	require.NoError(t, err, "the fence scenario cuts etcd traffic on the in-memory API")
	require.Equal(t, storeEtcd, o.store)

	o, err = parseFlags([]string{"--kubeconfig", "kc", "--taint=false"}, io.Discard)
	require.NoError(t, err)
	require.Equal(t, kubeExternal, o.kubeMode())
	require.False(t, o.taint)

	for _, args := range [][]string{
		{"--agents", "1"},
		{"--scenario", "chaos"},
		{"--election-ttl", "1500ms"},
		{"--kube", "remote"},
		{"--kube", "memory", "--kubeconfig", "kc"},
		{"--store", "zookeeper"},
		{"--etcd", "127.0.0.1:2379"}, // etcd endpoints without the etcd store
		{"--etcd-prefix", "/x/"},     // likewise
		{"--kube", "memory"},         // the in-memory API needs the etcd store
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

func TestLBStoreFence(t *testing.T) {
	s := newLBStore(lbrecontest.New(lbrecontest.Config{}))
	write := func() error { return nil }
	require.NoError(t, s.apply(5, lbrecon.VerbCreate, "a", write))
	require.NoError(t, s.apply(5, lbrecon.VerbCreate, "b", write))
	require.NoError(t, s.raise(7))
	err := s.apply(6, lbrecon.VerbDestroy, "a", func() error { t.Fatal("a stale write reached the engine"); return nil })
	require.ErrorIs(t, err, lbrecon.ErrFenced)
	require.True(t, backoff.IsPermanent(err), "a stale token must not be retried")
	highest, refused := s.state()
	require.Equal(t, uint64(7), highest)
	require.Equal(t, 1, refused)
	applied, refusedW := s.history()
	require.Equal(t, []uint64{5, 5, 7}, tokens(applied))
	require.Equal(t, []fencedWrite{{Token: 6, Highest: 7, Verb: lbrecon.VerbDestroy, Name: "a"}}, refusedW)
}

func tokens(ws []fencedWrite) []uint64 {
	var out []uint64
	for _, w := range ws {
		out = append(out, w.Token)
	}
	return out
}

// The compare and the write are one critical section: while a write
// admitted under a token is being applied, no higher token can be
// admitted, so the fence never moves between the compare and the write.
func TestLBStoreCompareAndWriteAtomic(t *testing.T) {
	s := newLBStore(lbrecontest.New(lbrecontest.Config{}))
	for _, token := range []uint64{3, 3} { // the first raises, the second is at the highest
		require.NoError(t, s.apply(token, lbrecon.VerbCreate, "x", func() error {
			require.False(t, s.mu.TryLock(), "the fence could move while a write under token %d was applied", token)
			return nil
		}))
	}
}

// A writer that passed its check and paused before its write (the fence
// scenario's deposed leader) is refused by the store once a higher token
// wrote, through lbrecon.Guard.
func TestPausedWriterRefusedAtApply(t *testing.T) {
	ctx := context.Background()
	eng := lbrecontest.New(lbrecontest.Config{})
	s := newLBStore(eng)
	lb, err := localConfig().loadBalancer(nil, []lbrecon.Target{{Name: "agent-1", Address: netip.MustParseAddr("10.0.0.1")}})
	require.NoError(t, err)

	held, release := make(chan struct{}), make(chan struct{})
	var once bool
	check := func(context.Context, lbrecon.Verb, lbrecon.Object) error {
		if !once { // the old leader's check passes, then it pauses
			once = true
			close(held)
			<-release
		}
		return nil
	}
	require.NoError(t, s.raise(5))
	r, err := lbrecon.NewLoadBalancer(lbrecon.Config{Engine: lbrecon.Guard(s.engine(), check), Tag: ownerTag, Journal: lbrecon.NoJournal, Parallelism: 1}, lb)
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- r.Reconcile(lbrecon.WithToken(ctx, 5)) }()
	recv(t, held, time.Minute, "pause of the old leader's write")
	require.NoError(t, s.raise(6)) // the successor's first write
	close(release)
	err = recv(t, done, time.Minute, "end of the old leader's Reconcile")
	require.ErrorIs(t, err, lbrecon.ErrFenced)
	require.Empty(t, eng.Objects(), "a write of the deposed leader was applied")
	applied, refused := s.history()
	require.Equal(t, []uint64{5, 6}, tokens(applied))
	require.Equal(t, uint64(5), refused[0].Token)
}

// A reconcile through Guard and the store converges the load balancer; a
// deposed leader's token is refused afterwards, by Update and Repair too,
// which Guard forwards to the store.
func TestFencedReconcile(t *testing.T) {
	ctx := context.Background()
	eng := lbrecontest.New(lbrecontest.Config{Repair: true})
	s := newLBStore(eng)
	allow := func(context.Context, lbrecon.Verb, lbrecon.Object) error { return nil }
	lb, err := localConfig().loadBalancer(releasePorts(versiongate.Release{Major: 1, Minor: 1}), []lbrecon.Target{
		{Name: "agent-1", Address: netip.MustParseAddr("10.0.0.1")},
		{Name: "agent-2", Address: netip.MustParseAddr("10.0.0.2")},
	})
	require.NoError(t, err)
	r, err := lbrecon.NewLoadBalancer(lbrecon.Config{Engine: lbrecon.Guard(s.engine(), allow), Tag: ownerTag, Journal: lbrecon.NoJournal}, lb)
	require.NoError(t, err)
	require.NoError(t, r.Reconcile(lbrecon.WithToken(ctx, 9)))
	sum := summarizeLB(eng.Objects())
	require.Equal(t, []string{"192.0.2.10:443", "192.0.2.10:80"}, sum.Binds)
	require.Equal(t, []string{"agent-1", "agent-2"}, sum.Targets)
	require.Equal(t, 2+2+2+4, sum.Objects)

	// Drift a stale leader would repair: a bind deleted outside (deleting a
	// backend under its servers would be an answer lbrecon refuses to act on).
	objs := eng.Objects()
	eng.DeleteObject(objs[slices.IndexFunc(objs, func(o lbrecon.Object) bool { return o.Kind == lbrecon.KindBind })].Key())
	err = r.Reconcile(lbrecon.WithToken(ctx, 8))
	require.ErrorIs(t, err, lbrecon.ErrFenced)

	g := lbrecon.Guard(s.engine(), allow)
	obj := eng.Objects()[0]
	_, err = g.(lbrecon.Updater).Update(lbrecon.WithToken(ctx, 8), obj, obj)
	require.ErrorIs(t, err, lbrecon.ErrFenced, "Guard must forward Update to the fenced store")
	_, err = g.(lbrecon.Repairer).Repair(lbrecon.WithToken(ctx, 8), obj)
	require.ErrorIs(t, err, lbrecon.ErrFenced, "Guard must forward Repair to the fenced store")
	_, err = g.(lbrecon.Updater).Update(lbrecon.WithToken(ctx, 9), obj, obj)
	require.NoError(t, err)
	_, err = g.(lbrecon.Updater).Update(ctx, obj, obj)
	require.ErrorIs(t, err, lbrecon.ErrNoToken, "a write without a term's token is refused")
}

// The agent keeps one reconciler for its load balancer across terms, and
// gives it each term's description.
func TestOneReconcilerAcrossTerms(t *testing.T) {
	a := &agent{env: &env{lb: newLBStore(lbrecontest.New(lbrecontest.Config{}))}}
	lb, err := localConfig().loadBalancer(nil, []lbrecon.Target{{Name: "agent-1", Address: netip.MustParseAddr("10.0.0.1")}})
	require.NoError(t, err)
	first, err := a.lbReconciler(lb)
	require.NoError(t, err)
	lb.Targets = append(lb.Targets, lbrecon.Target{Name: "agent-2", Address: netip.MustParseAddr("10.0.0.2")})
	second, err := a.lbReconciler(lb)
	require.NoError(t, err)
	require.Same(t, first, second, "a new reconciler would forget the writes no listing has shown yet")
	p, err := second.Check(lbrecon.WithToken(context.Background(), 1))
	require.NoError(t, err)
	require.Len(t, p.Create, len(lb.Ports), "plans for the latest description")
}

// A term raises the store's fence before its first write, so that a
// deposed leader is refused even when the new term has nothing to write.
func TestTermEngineRaisesFence(t *testing.T) {
	ctx := context.Background()
	e := &env{lb: newLBStore(lbrecontest.New(lbrecontest.Config{}))}
	a := &agent{env: e, ctx: ctx}
	tctx, err := a.termContext(ctx, 6)
	require.NoError(t, err)
	tok, ok := lbrecon.TokenFrom(tctx)
	require.True(t, ok)
	require.Equal(t, uint64(6), tok)
	highest, _ := e.lb.state()
	require.Equal(t, uint64(6), highest)
	_, err = e.lb.engine().Create(lbrecon.WithToken(ctx, 5), lbrecon.Object{Kind: lbrecon.KindBackend, Name: "late"})
	require.ErrorIs(t, err, lbrecon.ErrFenced)
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

// Only local.go uses the project's server harness, which is internal to
// the reconkit module; the rest of the program is what a host outside the
// module would write.
func TestHarnessConfinedToLocalGo(t *testing.T) {
	files, err := filepath.Glob("*.go")
	require.NoError(t, err)
	var users []string
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		parsed, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
		require.NoError(t, err)
		for _, imp := range parsed.Imports {
			if strings.Contains(imp.Path.Value, "reconkit/reconkit/internal/") {
				users = append(users, f+" "+imp.Path.Value)
			}
		}
	}
	require.Equal(t, []string{`local.go "github.com/reconkit/reconkit/internal/servers"`}, users)
}
