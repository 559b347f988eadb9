package etcdstore_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/reconkit/reconkit/election/etcd"
	"github.com/reconkit/reconkit/internal/testenv"
	"github.com/reconkit/reconkit/versiongate"
)

// rollingRelease is one of the releases the harness moves nodes through.
type rollingRelease struct {
	version, minCompat, minReconciler string
}

var rollingReleases = []rollingRelease{
	{version: "1.0.0", minCompat: "1.0.0", minReconciler: "1.0.0"},
	// Compatible with 1.0.0 nodes: no restriction needed.
	{version: "1.1.0", minCompat: "1.0.0", minReconciler: "1.0.0"},
	// Breaks 1.0.0 nodes, and needs a 1.1.0 reconciler at least.
	{version: "2.0.0", minCompat: "1.1.0", minReconciler: "1.1.0"},
}

// rollingHarness runs nodes with gate-owned records on one etcd and checks
// the safety invariant on every status revision.
type rollingHarness struct {
	t     *testing.T
	ctx   context.Context
	e     *testenv.EtcdCluster
	cli   *clientv3.Client
	clock *clocktesting.FakeClock

	mu         sync.Mutex
	serving    map[string]servingNode // node ID -> since
	violations []string
	readyCount int
}

type servingNode struct {
	release versiongate.Release
	since   int64 // status revision observed when the node started serving
}

type rollingNode struct {
	id      string
	rel     int // index into rollingReleases
	running bool

	gate   *versiongate.Gate
	cli    *clientv3.Client
	el     *etcd.Elector
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu       sync.Mutex
	stopping bool
}

func (h *rollingHarness) start(n *rollingNode) {
	t := h.t
	r := rollingReleases[n.rel]
	release := rel(t, r.version)
	n.cli = testenv.NewEtcdClient(t, h.e.Endpoints()...)
	// reconkit's etcd election, wired with no adapter: the elector is a
	// Candidate, its terms are Terms, and the etcd store fences their
	// writes with the candidate key's guard.
	el, err := etcd.New(etcd.Config{Client: n.cli, Prefix: testElection, Identity: n.id, SessionTTL: 2 * time.Second})
	require.NoError(t, err)
	n.el = el
	g, err := versiongate.New(versiongate.Config{
		Store:                    etcdStore(t, n.cli),
		NodeID:                   n.id,
		Version:                  ver(t, r.version),
		MinimumReconcilerRelease: rel(t, r.minReconciler),
		MinimumCompatibleRelease: rel(t, r.minCompat),
		RecordTTL:                2 * time.Second,
		Candidate:                el,
		Reconcile:                func(context.Context, versiongate.Term) error { return nil },
		Clock:                    h.clock,
	})
	require.NoError(t, err)
	n.gate = g
	n.stopping = false
	ctx, cancel := context.WithCancel(h.ctx)
	n.cancel = cancel
	n.running = true
	n.wg.Add(2)
	go func() {
		defer n.wg.Done()
		_ = g.Run(ctx)
	}()
	go func() {
		defer n.wg.Done()
		if g.WaitReady(ctx) != nil {
			return
		}
		// The node starts serving: check it against the status in force
		// now, and from then on against every later status.
		resp, err := h.cli.Get(context.WithoutCancel(ctx), testStatusKey)
		if err != nil {
			return
		}
		n.mu.Lock()
		defer n.mu.Unlock()
		if n.stopping {
			return
		}
		h.mu.Lock()
		defer h.mu.Unlock()
		if len(resp.Kvs) == 1 {
			if st, err := versiongate.DecodeStatus(resp.Kvs[0].Value); err == nil && release.Less(st.MinimumCompatibleRelease) {
				h.violations = append(h.violations, fmt.Sprintf("%s@%s passed WaitReady under %s", n.id, release, st))
			}
		}
		h.serving[n.id] = servingNode{release: release, since: resp.Header.Revision}
		h.readyCount++
	}()
}

// stop ends the node. A crash closes its client first, so nothing is
// revoked or resigned: its election session and its record expire on the
// server, in real time, as a dead process's would.
func (h *rollingHarness) stop(n *rollingNode, crash bool) {
	n.mu.Lock()
	n.stopping = true
	n.mu.Unlock()
	h.mu.Lock()
	delete(h.serving, n.id)
	h.mu.Unlock()
	if crash {
		n.cli.Close()
	}
	n.cancel()
	n.wg.Wait()
	_ = n.el.Close()
	n.running = false
}

// check watches every status revision and checks it against the serving
// nodes.
func (h *rollingHarness) check(ctx context.Context) {
	for resp := range h.cli.Watch(ctx, testStatusKey, clientv3.WithRev(1)) {
		for _, ev := range resp.Events {
			if ev.Type != clientv3.EventTypePut {
				continue
			}
			st, err := versiongate.DecodeStatus(ev.Kv.Value)
			h.mu.Lock()
			if err != nil {
				h.violations = append(h.violations, "corrupt status written: "+err.Error())
			}
			for id, s := range h.serving {
				if s.since < ev.Kv.ModRevision && s.release.Less(st.MinimumCompatibleRelease) {
					h.violations = append(h.violations, fmt.Sprintf("%s@%s serving under %s (revision %d)", id, s.release, st, ev.Kv.ModRevision))
				}
			}
			h.mu.Unlock()
		}
	}
}

func TestRollingUpgrade(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("VERSIONGATE_SEED"); s != "" {
		var err error
		seed, err = strconv.ParseUint(s, 10, 64)
		require.NoError(t, err)
	}
	const nodes, steps = 6, 40
	t.Logf("rolling upgrade: seed %d (rerun with VERSIONGATE_SEED=%d), %d nodes, %d steps", seed, seed, nodes, steps)
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))

	e := testenv.Etcd(t)
	h := &rollingHarness{t: t, ctx: context.Background(), e: e, cli: e.Client(t),
		clock: clocktesting.NewFakeClock(time.Now()), serving: map[string]servingNode{}}
	h.ctx = testContextQuiet(t)
	pumpClock(t, h.clock, time.Second)
	checkCtx, stopCheck := context.WithCancel(h.ctx)
	checkDone := make(chan struct{})
	go func() { defer close(checkDone); h.check(checkCtx) }()
	defer func() { stopCheck(); recv(t, checkDone, "the checker's end") }()

	all := make([]*rollingNode, nodes)
	for i := range all {
		all[i] = &rollingNode{id: fmt.Sprintf("node-%d", i)}
		h.start(all[i])
	}
	defer func() {
		for _, n := range all {
			if n.running {
				h.stop(n, false)
			}
		}
	}()

	counts := map[string]int{}
	for step := 0; step < steps; step++ {
		n := all[rng.IntN(nodes)]
		switch p := rng.IntN(100); {
		case p < 45 && n.rel < len(rollingReleases)-1:
			if n.running {
				h.stop(n, false)
			}
			n.rel++
			if rng.IntN(5) == 0 {
				n.rel = len(rollingReleases) - 1 // skip a release
			}
			h.start(n)
			counts["upgrade"]++
		case p < 65 && n.running:
			h.stop(n, true)
			counts["crash"]++
		case p < 85 && !n.running:
			h.start(n)
			counts["restart"]++
		default:
			// Let the cluster move for a moment: until some gate leads
			// and has finished or is waiting for incompatible nodes.
			deadline := time.Now().Add(2 * time.Second)
			for time.Now().Before(deadline) && !anyPhase(all, versiongate.PhaseDone, versiongate.PhaseRestricting) {
				<-time.After(5 * time.Millisecond)
			}
			counts["pause"]++
		}
	}
	// Finish the rollout: every node up at the newest release.
	for _, n := range all {
		if n.rel != len(rollingReleases)-1 || !n.running {
			if n.running {
				h.stop(n, false)
			}
			n.rel = len(rollingReleases) - 1
			h.start(n)
		}
	}
	t.Logf("actions: %v", counts)

	newest := rollingReleases[len(rollingReleases)-1]
	want := versiongate.Status{State: versiongate.StateDone, Version: ver(t, newest.version), MinimumCompatibleRelease: rel(t, newest.minCompat)}
	require.Eventually(t, func() bool {
		resp, err := h.cli.Get(h.ctx, testStatusKey)
		if err != nil || len(resp.Kvs) != 1 {
			return false
		}
		st, err := versiongate.DecodeStatus(resp.Kvs[0].Value)
		h.mu.Lock()
		defer h.mu.Unlock()
		return err == nil && st == want && len(h.serving) == nodes
	}, 60*time.Second, 10*time.Millisecond, "status DONE at %s and every node serving", newest.version)

	h.mu.Lock()
	defer h.mu.Unlock()
	t.Logf("WaitReady passed %d times", h.readyCount)
	require.Empty(t, h.violations, "seed %d", seed)
}

func anyPhase(nodes []*rollingNode, phases ...versiongate.Phase) bool {
	for _, n := range nodes {
		if !n.running {
			continue
		}
		for _, p := range phases {
			if n.gate.Phase() == p {
				return true
			}
		}
	}
	return false
}
