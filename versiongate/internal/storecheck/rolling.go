package storecheck

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/reconkit/reconkit/versiongate"
)

// release is one of the releases the rolling driver moves nodes through.
type release struct {
	version, minCompat, minReconciler versiongate.Release
}

func rel(major, minor uint64) versiongate.Release {
	return versiongate.Release{Major: major, Minor: minor}
}

var releases = []release{
	{version: rel(1, 0), minCompat: rel(1, 0), minReconciler: rel(1, 0)},
	// Compatible with 1.0.0 nodes: no restriction needed.
	{version: rel(1, 1), minCompat: rel(1, 0), minReconciler: rel(1, 0)},
	// Breaks 1.0.0 nodes, and needs a 1.1.0 reconciler at least.
	{version: rel(2, 0), minCompat: rel(1, 1), minReconciler: rel(1, 1)},
}

// RollingConfig configures RunRolling. Zero values take the defaults.
type RollingConfig struct {
	// Nodes is the number of nodes (default 5).
	Nodes int
	// Steps is the number of random actions (default 30).
	Steps int
	// Seed seeds the actions; logged so a failure can be replayed.
	Seed uint64
	// RecordTTL is the gates' RecordTTL (default 2s).
	RecordTTL time.Duration
	// Timeout bounds the wait for the upgrade to complete (default 60s).
	Timeout time.Duration
	// Context carries the gates' logger; nil means context.Background().
	Context context.Context
	// ServerRestarts is the number of server restarts the run makes at
	// least (if the backend can restart its server), at seeded steps,
	// besides those the random steps choose.
	ServerRestarts int
	// Budget bounds each node's store calls (see CheckBudget); zero
	// fields take DefaultBudget(RecordTTL).
	Budget Budget
}

// RollingResult is what RunRolling measured.
type RollingResult struct {
	// Actions counts the actions taken, by name.
	Actions map[string]int
	// Ready counts the times a node passed WaitReady.
	Ready int
	// Checks counts the safety checks made.
	Checks int
	// History is every store operation.
	History []Op
	// Busiest is, per kind of call, the busiest node's most calls in a
	// budget window.
	Busiest []Busiest
}

// rollingNode is one node of the rolling driver.
type rollingNode struct {
	id      string
	rel     int
	running bool
	cut     bool
	runs    int
	// readyAt is when its WaitReady last returned; -1 for not in this
	// run.
	readyAt time.Duration

	conn   Conn
	gate   *versiongate.Gate
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

type rolling struct {
	t   *testing.T
	ctx context.Context
	b   Backend
	cfg RollingConfig
	rec *Recorder
	obs versiongate.Store

	mu         sync.Mutex
	nodes      []*rollingNode
	violations []string
	sightings  []sighting
	ready      int
	checks     atomic.Int64
	// down holds while the server restarts (see startWaiter).
	down outage
}

// RunRolling runs a rolling upgrade of cfg.Nodes nodes from release 1.0.0
// through 1.1.0 to 2.0.0 (which breaks 1.0.0 nodes) on b: each node runs a
// real versiongate.Gate on its own connection, with
// RejoinAfterRecordLoss, and serves whenever WaitReady returned and Ready
// holds. Seeded random steps upgrade nodes (sometimes skipping a
// release), crash and restart them, cut and heal their connections (if
// b.Partition is set) and restart the server (if b.RestartServer is set;
// cfg.ServerRestarts times at least).
// After every step, and at every status change, it checks that no node
// serves while a status whose minimum compatible release is above the
// node's release stands, validated: a status written by a write that
// returned OK, read before and after the node is asked, with no other
// status write that could have landed in between (see judgeSighting; the
// minimum does go down in this upgrade, when a 1.1.0 leader follows a
// 2.0.0 one, and a store that validates after writing shows a write it
// then puts back). Then it heals everything,
// brings every node up at 2.0.0 and waits until the status is DONE at
// 2.0.0 and every node serves. At the end it checks the recorded history
// of every store operation for linearizability. Failures are reported
// on t.
func RunRolling(t *testing.T, b Backend, cfg RollingConfig) RollingResult {
	t.Helper()
	if cfg.Nodes == 0 {
		cfg.Nodes = 5
	}
	if cfg.Steps == 0 {
		cfg.Steps = 30
	}
	if cfg.RecordTTL == 0 {
		cfg.RecordTTL = 2 * time.Second
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 60 * time.Second
	}
	if cfg.Context == nil {
		cfg.Context = context.Background()
	}
	t.Logf("rolling upgrade: seed %d, %d nodes, %d steps", cfg.Seed, cfg.Nodes, cfg.Steps)
	rng := rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15))
	rec := b.recorder()
	h := &rolling{t: t, ctx: cfg.Context, b: b, cfg: cfg, rec: rec, obs: rec.Wrap("observer", b.Observer)}

	wctx, stopWatch := context.WithCancel(cfg.Context)
	watchDone := make(chan struct{})
	go func() { defer close(watchDone); h.watch(wctx) }()

	for i := range cfg.Nodes {
		h.nodes = append(h.nodes, &rollingNode{id: fmt.Sprintf("node-%d", i)})
	}
	for _, n := range h.nodes {
		h.start(n)
	}
	waiterDone := h.startWaiter()
	defer func() {
		for _, n := range h.nodes {
			if n.running {
				h.stop(n, false)
			}
		}
		stopWatch()
		await(t, watchDone, "the status watch")
	}()

	counts := map[string]int{}
	restarts := 0
	forced := map[int]bool{}
	if b.RestartServer != nil {
		for len(forced) < min(cfg.ServerRestarts, cfg.Steps) {
			forced[rng.IntN(cfg.Steps)] = true
		}
	}
	for step := range cfg.Steps {
		if forced[step] {
			restarts++
			h.restartServer()
			counts["server restart"]++
			h.check()
			continue
		}
		n := h.nodes[rng.IntN(len(h.nodes))]
		switch p := rng.IntN(100); {
		case p < 35 && n.rel < len(releases)-1:
			if n.running {
				h.stop(n, false)
			}
			n.rel++
			if rng.IntN(5) == 0 {
				n.rel = len(releases) - 1 // skip a release
			}
			h.start(n)
			counts["upgrade"]++
		case p < 50 && n.running:
			h.stop(n, true)
			counts["crash"]++
		case p < 65 && !n.running:
			h.start(n)
			counts["restart"]++
		case p < 80 && b.Partition != nil && n.running:
			n.cut = !n.cut
			b.Partition(n.id, n.cut)
			if n.cut {
				counts["cut"]++
			} else {
				counts["heal"]++
			}
		case p < 84 && b.RestartServer != nil && restarts < 2:
			restarts++
			h.restartServer()
			counts["server restart"]++
		default:
			h.settle(2 * time.Second)
			counts["pause"]++
		}
		h.check()
	}
	// Finish the rollout: everything healed, every node up at the newest
	// release.
	for _, n := range h.nodes {
		if n.cut {
			n.cut = false
			b.Partition(n.id, false)
		}
		if n.rel != len(releases)-1 || !n.running {
			if n.running {
				h.stop(n, false)
			}
			n.rel = len(releases) - 1
			h.start(n)
		}
	}
	t.Logf("rolling upgrade: actions %v", counts)

	newest := releases[len(releases)-1]
	want := versiongate.Status{State: versiongate.StateDone, Version: versiongate.Version{Release: newest.version}, MinimumCompatibleRelease: newest.minCompat}
	deadline := time.Now().Add(cfg.Timeout)
	for {
		st, err := h.obs.ReadStatus(cfg.Context)
		done := err == nil && st.Value != nil
		if done {
			cur, derr := versiongate.DecodeStatus(st.Value)
			done = derr == nil && cur == want
		}
		for _, n := range h.nodes {
			done = done && n.gate.Ready()
		}
		h.check()
		if done {
			break
		}
		if time.Now().After(deadline) {
			var nodes []string
			for _, n := range h.nodes {
				nodes = append(nodes, fmt.Sprintf("%s: ready %v, phase %s, leading %v, status error %v", n.id, n.gate.Ready(), n.gate.Phase(), n.gate.Leading(), n.gate.StatusError()))
			}
			t.Errorf("rolling upgrade (seed %d): not complete after %v: want status %s and every node serving; %v", cfg.Seed, cfg.Timeout, want, nodes)
			break
		}
		<-time.After(20 * time.Millisecond)
	}
	for _, n := range h.nodes {
		h.stop(n, false)
	}
	stopWatch()
	await(t, watchDone, "the status watch")
	waiterDone()

	h.mu.Lock()
	res := RollingResult{Actions: counts, Ready: h.ready, Checks: int(h.checks.Load()), History: rec.History()}
	h.judgeSightings(res.History)
	for _, v := range h.violations {
		t.Errorf("rolling upgrade (seed %d): %s", cfg.Seed, v)
	}
	h.mu.Unlock()
	t.Logf("rolling upgrade: WaitReady passed %d times; %d safety checks; %d store operations; status writes by outcome %v", res.Ready, res.Checks, len(res.History), writeOutcomes(res.History))
	res.Busiest = CheckBudget(t, rec.Calls(), cfg.Budget.withDefaults(cfg.RecordTTL))
	Check(t, res.History)
	return res
}

// startWaiter starts a gate that waits in WaitReady for the whole run
// and never passes it (it needs a reconciler release no node has) nor
// publishes a record (its host owns the records), so that a readiness
// wait meets every server restart and partition of the run and its
// requests are budgeted: a read retried at a fixed pace while the server
// is down, or a status watch from a revision the restarted server no
// longer serves, read and watched again and again, go past the budget.
// While the server restarts, its calls fail at once (errServerDown), as
// on a connection the server refuses, rather than wait in the client's
// own retries (client-go retries a refused GET for up to 10s; the etcd
// client waits for a connection): so the wait meets an answer that comes
// at once, persistently, for the length of the restart. The returned
// func stops it and waits for it.
func (h *rolling) startWaiter() func() {
	g, err := versiongate.New(versiongate.Config{
		Store:                    h.rec.Wrap("waiter", refusedWhileDown{h.b.Observer, &h.down}),
		NodeID:                   "waiter",
		Version:                  versiongate.Version{Release: releases[0].version},
		MinimumReconcilerRelease: rel(99, 0),
		MinimumCompatibleRelease: releases[0].minCompat,
		Decode: func(string, []byte) (versiongate.Release, bool, error) {
			return versiongate.Release{}, false, nil
		},
	})
	if err != nil {
		h.t.Fatalf("rolling upgrade: the waiter: %v", err)
	}
	ctx, cancel := context.WithCancel(h.ctx)
	done := make(chan error, 1)
	go func() { done <- g.WaitReady(ctx) }()
	return func() {
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			h.t.Errorf("rolling upgrade: the waiter's WaitReady returned %v, want it to wait until stopped", err)
		}
	}
}

// restartServer restarts the server, logged as the watch history moving
// on: a restarted apiserver's watch cache starts at its restart.
func (h *rolling) restartServer() {
	h.down.set(true)
	defer h.down.set(false)
	h.rec.MovedOn("server restart", func() { h.b.RestartServer(h.t) })
}

// errServerDown is the waiter's answer while the server restarts.
var errServerDown = errors.New("storecheck: connection refused (the server is restarting)")

// outage says whether the server is down, and tells when it goes down.
type outage struct {
	mu   sync.Mutex
	down bool
	ch   chan struct{} // closed when the server goes down
}

func (o *outage) set(down bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.ch == nil {
		o.ch = make(chan struct{})
	}
	if down && !o.down {
		close(o.ch)
	}
	if !down && o.down {
		o.ch = make(chan struct{})
	}
	o.down = down
}

// state returns whether the server is down, and a channel closed when it
// next goes down.
func (o *outage) state() (bool, <-chan struct{}) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.ch == nil {
		o.ch = make(chan struct{})
	}
	return o.down, o.ch
}

// refusedWhileDown fails the status reads and watches at once while the
// server is down, and ends a status watch when it goes down, as a
// connection the server closed and then refuses.
type refusedWhileDown struct {
	versiongate.Store
	down *outage
}

func (s refusedWhileDown) ReadStatus(ctx context.Context) (versiongate.StoredStatus, error) {
	if down, _ := s.down.state(); down {
		return versiongate.StoredStatus{}, errServerDown
	}
	return s.Store.ReadStatus(ctx)
}

func (s refusedWhileDown) WatchStatus(ctx context.Context, rev int64, fn func(versiongate.StoredStatus) bool) error {
	down, goes := s.down.state()
	if down {
		return errServerDown
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stopped := make(chan struct{})
	defer close(stopped)
	var wentDown atomic.Bool
	go func() {
		select {
		case <-goes:
			wentDown.Store(true)
			cancel()
		case <-stopped:
		}
	}()
	err := s.Store.WatchStatus(wctx, rev, fn)
	if wentDown.Load() && ctx.Err() == nil {
		return errServerDown
	}
	return err
}

func (h *rolling) start(n *rollingNode) {
	t := h.t
	r := releases[n.rel]
	n.runs++
	n.conn = h.b.Connect(t, n.id)
	rd := newReadiness()
	g, err := versiongate.New(versiongate.Config{
		Store:                    h.rec.Wrap(fmt.Sprintf("%s#%d", n.id, n.runs), n.conn.Store),
		NodeID:                   n.id,
		Version:                  versiongate.Version{Release: r.version},
		MinimumReconcilerRelease: r.minReconciler,
		MinimumCompatibleRelease: r.minCompat,
		RecordTTL:                h.cfg.RecordTTL,
		Candidate:                n.conn.Candidate,
		Reconcile:                noReconcile,
		SettleTime:               100 * time.Millisecond,
		RejoinAfterRecordLoss:    true,
		Conditions:               rd,
	})
	if err != nil {
		t.Fatalf("rolling upgrade: %v", err)
	}
	h.mu.Lock()
	n.gate = g
	n.running = true
	n.readyAt = -1
	h.mu.Unlock()
	ctx, cancel := context.WithCancel(h.ctx)
	n.cancel = cancel
	n.wg.Add(2)
	go func() {
		defer n.wg.Done()
		_ = g.Run(ctx)
	}()
	go func() {
		defer n.wg.Done()
		for {
			if err := g.WaitReady(ctx); err != nil {
				if ctx.Err() != nil {
					return
				}
				continue // the record was lost: wait for the next one
			}
			h.mu.Lock()
			h.ready++
			n.readyAt = h.rec.now()
			h.mu.Unlock()
			h.check()
			waitNotReady(ctx, g, rd)
			if ctx.Err() != nil {
				return
			}
		}
	}()
}

// stop ends the node; a crash closes its connection first.
func (h *rolling) stop(n *rollingNode, crash bool) {
	if n.cut {
		n.cut = false
		h.b.Partition(n.id, false)
	}
	if crash {
		n.conn.close(true)
	}
	n.cancel()
	n.wg.Wait()
	if !crash {
		n.conn.close(false)
	}
	h.mu.Lock()
	n.running = false
	h.mu.Unlock()
}

// settle waits up to d for some gate to lead and be done or restricting.
func (h *rolling) settle(d time.Duration) {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		for _, n := range h.nodes {
			if n.running && (n.gate.Phase() == versiongate.PhaseDone || n.gate.Phase() == versiongate.PhaseRestricting) {
				return
			}
		}
		<-time.After(10 * time.Millisecond)
	}
}

// watch checks at every status change the observer sees, with the
// status the watch delivered as the read before the question: it was
// current at the latest when it arrived, and it is seen even when it
// stands only for a moment (a write the store puts back).
func (h *rolling) watch(ctx context.Context) {
	var rev int64
	for ctx.Err() == nil {
		err := h.b.Observer.WatchStatus(ctx, rev, func(st versiongate.StoredStatus) bool {
			rev = st.Revision
			at := h.rec.now()
			h.checkFrom(h.decoded(statusRead{call: at, ret: at}, st))
			return false
		})
		if ctx.Err() != nil {
			return
		}
		_ = err
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}
