package storecheck

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/reconkit/reconkit/versiongate"
)

// JoinersConfig configures RunJoiners. Zero values take the defaults.
type JoinersConfig struct {
	// Joiners bounds the joiners started before the leader's restrict
	// (default 30); once reached, the driver waits for the restrict.
	Joiners int
	// After is the number of joiners started once the restricted status
	// is written (default 5).
	After int
	// ListDelay and WatchDelay are injected into every node's store (see
	// Lag): the leader's and the joiners' listings answer late.
	ListDelay, WatchDelay time.Duration
	// Joiner, if not nil, wraps each joiner's store, for example with a
	// stale cache (Stale.Reader) to show that the driver can fail.
	Joiner func(versiongate.Store) versiongate.Store
	// Budget bounds each node's store calls (see CheckBudget); zero
	// fields take DefaultBudget(RecordTTL).
	Budget Budget
	// Seed seeds the joiners' timing; logged.
	Seed uint64
	// RecordTTL is the gates' RecordTTL (default 2s).
	RecordTTL time.Duration
	// Timeout bounds each wait (default 60s).
	Timeout time.Duration
	// Context carries the gates' logger; nil means context.Background().
	Context context.Context
}

// JoinersResult is what RunJoiners counted.
type JoinersResult struct {
	// Joiners is the number of joiners started; AfterRestrict those
	// started after the restricted write returned (each of which must be
	// held back).
	Joiners, AfterRestrict int
	// Served counts the joiners that passed WaitReady.
	Served int
	// Refused counts the conditioned status writes refused with
	// ErrNodesChanged: the races the condition decided.
	Refused int
	// Violations counts the joiners that served after the leader's
	// restricted write (which the leader kept) had returned.
	Violations int
	// History is every store operation; the caller checks it.
	History []Op
	// Busiest is, per kind of call, the busiest node's most calls in a
	// budget window (see CheckBudget; RunJoiners checks the budget).
	Busiest []Busiest
}

// joiner is what the driver learned of one joiner.
type joiner struct {
	id                     string
	served                 bool
	started, readyAt, till time.Duration
}

// RunJoiners races joiners against a leader's restrict on b. A node at
// 1.0.0 first writes the status DONE 1.0.0 (minimum 1.0.0) and stops.
// Joiners at 1.0.0 then come and go: each publishes its record and, if
// WaitReady returns, serves for a random moment (the first until the
// leader waits in its restrict) and stops; one that WaitReady holds back
// stops as soon as it waits for a status change. A leader at 2.0.0
// (minimum 2.0.0) restricts the status once it sees no 1.0.0 record, by
// a write conditioned on the records. Once that write returned, After
// more joiners come. A violation is a joiner that served after the
// restricted write returned: it serves with a release below the minimum
// the leader wrote and kept. On a correct store there is none. Once, just
// before the leader's first restricting write goes out, one more joiner
// publishes and serves (or waits) on the old status, and serves until
// that write returned: the write, conditioned on records listed before
// that joiner's, must be refused.
func RunJoiners(t *testing.T, b Backend, cfg JoinersConfig) JoinersResult {
	t.Helper()
	if cfg.Joiners == 0 {
		cfg.Joiners = 30
	}
	if cfg.After == 0 {
		cfg.After = 5
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
	if cfg.Joiner == nil {
		cfg.Joiner = func(s versiongate.Store) versiongate.Store { return s }
	}
	ctx := cfg.Context
	t.Logf("joiners: seed %d, list delay %v, watch delay %v", cfg.Seed, cfg.ListDelay, cfg.WatchDelay)
	rng := rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15))
	rec := b.recorder()
	obs := rec.Wrap("observer", b.Observer)
	lag := func(s versiongate.Store) versiongate.Store {
		return &Lag{Store: s, List: cfg.ListDelay, Watch: cfg.WatchDelay}
	}
	old, next := rel(1, 0), rel(2, 0)

	// The status a 1.0.0 leader writes.
	seed := b.Connect(t, "seed")
	g, err := versiongate.New(versiongate.Config{
		Store: rec.Wrap("seed", seed.Store), NodeID: "seed", Version: versiongate.Version{Release: old},
		MinimumReconcilerRelease: old, MinimumCompatibleRelease: old, RecordTTL: cfg.RecordTTL,
		Candidate: seed.Candidate, Reconcile: noReconcile, SettleTime: -1,
	})
	if err != nil {
		t.Fatalf("joiners: %v", err)
	}
	sctx, stopSeed := context.WithCancel(ctx)
	seedDone := make(chan struct{})
	go func() { defer close(seedDone); _ = g.Run(sctx) }()
	err = g.WaitReady(sctx)
	if err == nil {
		// WaitReady may return on a status write still in progress (a
		// store that validates after writing shows it first): stop only
		// once the write returned and stood.
		waitPhase(sctx, g, versiongate.PhaseDone, cfg.Timeout)
	}
	stopSeed()
	await(t, seedDone, "the first node's gate")
	seed.close(false)
	if err != nil {
		t.Fatalf("joiners: the first node never passed WaitReady: %v", err)
	}

	var (
		mu      sync.Mutex
		joiners []joiner
		wg      sync.WaitGroup
		leader  = make(chan *versiongate.Gate, 1)
	)
	restricted := func() (Op, bool) { return restrictedWrite(rec.History(), next) }
	// start starts joiner i; hold is how long it serves once ready.
	start := func(i int, hold func(context.Context)) <-chan bool {
		readyc := make(chan bool, 1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := fmt.Sprintf("joiner-%d", i)
			started := rec.now()
			conn := b.Connect(t, id)
			defer conn.close(false)
			settled := make(chan struct{})
			store := &watchHook{Store: rec.Wrap(id, cfg.Joiner(lag(conn.Store))), called: settled}
			g, err := versiongate.New(versiongate.Config{
				Store: store, NodeID: id, Version: versiongate.Version{Release: old},
				MinimumReconcilerRelease: old, MinimumCompatibleRelease: old, RecordTTL: cfg.RecordTTL,
				Candidate: noCandidate, Reconcile: noReconcile,
			})
			if err != nil {
				t.Errorf("joiners: %v", err)
				readyc <- false
				return
			}
			jctx, cancel := context.WithCancel(ctx)
			defer cancel()
			runDone := make(chan struct{})
			var runErr error
			go func() { defer close(runDone); runErr = g.Run(jctx) }()
			defer func() { cancel(); await(t, runDone, "a joiner's gate") }()
			waitc := make(chan error, 1)
			go func() { waitc <- g.WaitReady(jctx) }()
			defer func() { cancel(); await(t, waitc, "a joiner's WaitReady") }()
			j := joiner{id: id, started: started}
			timeout := time.NewTimer(cfg.Timeout)
			defer timeout.Stop()
			select {
			case err := <-waitc:
				waitc <- err // for the deferred receive
				if errors.Is(err, versiongate.ErrRecordLost) {
					// As below: a keep-alive answered too late on a
					// loaded machine. It does not serve.
					t.Logf("joiners: %s lost its record before it served: %v", id, err)
					readyc <- false
					break
				}
				if err != nil {
					t.Errorf("joiners: %s: WaitReady: %v", id, err)
					readyc <- false
					break
				}
				j.served, j.readyAt = true, rec.now()
				readyc <- true
				hold(jctx)
				j.till = j.readyAt
				if g.Ready() {
					j.till = rec.now()
				}
			case <-settled:
				readyc <- false
			case <-runDone:
				// Its record lost before it served (a loaded machine can
				// delay a keep-alive past the record's validity): it never
				// serves, and its record expires.
				t.Logf("joiners: %s stopped before it served or waited: %v", id, runErr)
				readyc <- false
			case <-timeout.C:
				t.Errorf("joiners: %s neither served nor waited after %v (phase %s, ready %v, status error %v)", id, cfg.Timeout, g.Phase(), g.Ready(), g.StatusError())
				readyc <- false
			}
			mu.Lock()
			joiners = append(joiners, j)
			mu.Unlock()
		}()
		return readyc
	}

	// The first joiner serves until the leader waits for it to go.
	if !<-start(0, func(ctx context.Context) {
		var l *versiongate.Gate
		select {
		case l = <-leader:
		case <-ctx.Done():
			return
		}
		leader <- l
		waitPhase(ctx, l, versiongate.PhaseRestricting, cfg.Timeout)
	}) {
		t.Fatalf("joiners: the first joiner did not serve on the status %s wrote", "seed")
	}

	lconn := b.Connect(t, "leader")
	// The racer: once, just before the leader's first restricting write,
	// a joiner publishes and serves on the old status, so that the write
	// is conditioned on records listed before the racer's. The store must
	// refuse it; the racer serves until the write returned.
	racer := &raceRestrict{min: next, race: func(wrote <-chan struct{}) {
		<-start(cfg.Joiners+cfg.After, func(ctx context.Context) {
			select {
			case <-wrote:
			case <-ctx.Done():
			}
		})
	}}
	lg, err := versiongate.New(versiongate.Config{
		Store: racer.wrap(rec.Wrap("leader", lag(lconn.Store))), NodeID: "leader", Version: versiongate.Version{Release: next},
		MinimumReconcilerRelease: old, MinimumCompatibleRelease: next, RecordTTL: cfg.RecordTTL,
		Candidate: lconn.Candidate, Reconcile: noReconcile, SettleTime: 100 * time.Millisecond,
	})
	if err != nil {
		t.Fatalf("joiners: %v", err)
	}
	lctx, stopLeader := context.WithCancel(ctx)
	leaderDone := make(chan struct{})
	var leaderErr error // Run's error, once leaderDone is closed
	go func() { defer close(leaderDone); leaderErr = lg.Run(lctx) }()
	defer func() { stopLeader(); await(t, leaderDone, "the leader's gate"); lconn.close(false) }()
	leader <- lg

	holdFor := func(d time.Duration) func(context.Context) {
		return func(ctx context.Context) {
			select {
			case <-time.After(d):
			case <-ctx.Done():
			}
		}
	}
	n, after := 1, 0
	deadline := time.Now().Add(cfg.Timeout)
	for after < cfg.After {
		if time.Now().After(deadline) {
			ran := "running"
			select {
			case <-leaderDone:
				ran = fmt.Sprintf("Run returned %v", leaderErr)
			default:
			}
			t.Errorf("joiners: the leader did not restrict within %v (phase %s, leading %v, blocking %v, %s)", cfg.Timeout, lg.Phase(), lg.Leading(), lg.Blocking(), ran)
			break
		}
		_, done := restricted()
		if !done && n >= cfg.Joiners {
			<-time.After(10 * time.Millisecond) // wait for the restrict
			continue
		}
		if done {
			after++
		}
		start(n, holdFor(time.Duration(rng.Int64N(int64(100*time.Millisecond)))))
		n++
		<-time.After(time.Duration(rng.Int64N(int64(60 * time.Millisecond))))
	}
	wg.Wait()

	res := JoinersResult{Joiners: n}
	w, ok := restricted()
	for _, j := range joiners {
		if j.served {
			res.Served++
		}
		if ok && j.started > w.Return {
			res.AfterRestrict++
		}
		if ok && j.served && j.till > w.Return {
			res.Violations++
			t.Logf("joiners: violation: %s@%s served from %v to %v, after the restricted write returned at %v", j.id, old, j.readyAt, j.till, w.Return)
		}
	}
	// The leader kept its minimum.
	if st, err := obs.ReadStatus(ctx); err != nil || st.Value == nil {
		t.Errorf("joiners: final status: %v", err)
	} else if cur, err := versiongate.DecodeStatus(st.Value); err != nil || cur.MinimumCompatibleRelease.Less(next) {
		t.Errorf("joiners: final status %s (%v) does not keep the minimum %s", cur, err, next)
	}
	res.History = rec.History()
	res.Busiest = CheckBudget(t, rec.Calls(), cfg.Budget.withDefaults(cfg.RecordTTL))
	for _, o := range res.History {
		if o.Input.Kind == KindWrite && o.Output.Outcome == NodesChanged {
			res.Refused++
		}
	}
	t.Logf("joiners: %d started, %d served, %d after the restrict; %d conditioned writes refused; %d violations; restricted write returned at %v",
		res.Joiners, res.Served, res.AfterRestrict, res.Refused, res.Violations, w.Return)
	return res
}

// restrictedWrite finds the first successful write of a status whose
// minimum is at least min.
func restrictedWrite(h []Op, min versiongate.Release) (Op, bool) {
	for _, o := range h {
		if o.Input.Kind != KindWrite || o.Output.Outcome != OK {
			continue
		}
		if st, err := versiongate.DecodeStatus([]byte(o.Input.Value)); err == nil && !st.MinimumCompatibleRelease.Less(min) {
			return o, true
		}
	}
	return Op{}, false
}

// waitPhase waits until g's phase is p, ctx ends or d passes.
func waitPhase(ctx context.Context, g *versiongate.Gate, p versiongate.Phase, d time.Duration) {
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		ch := g.PhaseChanged()
		if g.Phase() == p {
			return
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return
		case <-timer.C:
			return
		}
	}
}

// watchHook closes called at the first WatchStatus: a gate whose
// WaitReady watches the status found it not admitting its release.
type watchHook struct {
	versiongate.Store
	once   sync.Once
	called chan struct{}
}

func (w *watchHook) WatchStatus(ctx context.Context, rev int64, fn func(versiongate.StoredStatus) bool) error {
	w.once.Do(func() { close(w.called) })
	return w.Store.WatchStatus(ctx, rev, fn)
}

// raceRestrict calls race once, before the first status write conditioned
// on the records (nodesRev > 0) whose minimum is at least min, and lets
// the write go once race returned; race's channel is closed when the
// write returned.
type raceRestrict struct {
	min  versiongate.Release
	race func(wrote <-chan struct{})
	once sync.Once
}

func (r *raceRestrict) wrap(s versiongate.Store) versiongate.Store {
	return &raceStore{Store: s, r: r}
}

type raceStore struct {
	versiongate.Store
	r *raceRestrict
}

func (s *raceStore) WriteStatus(ctx context.Context, t versiongate.Term, value []byte, nodesRev int64) error {
	st, err := versiongate.DecodeStatus(value)
	if nodesRev <= 0 || err != nil || st.MinimumCompatibleRelease.Less(s.r.min) {
		return s.Store.WriteStatus(ctx, t, value, nodesRev)
	}
	wrote := make(chan struct{})
	raced := false
	s.r.once.Do(func() {
		raced = true
		s.r.race(wrote)
	})
	if raced {
		defer close(wrote)
	}
	return s.Store.WriteStatus(ctx, t, value, nodesRev)
}
