package fleetsim

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/reconkit/reconkit/checkpoint"
	"github.com/reconkit/reconkit/versiongate"
)

// Nodes describes the Nodes the agents register, for the node lifecycle
// the world plays and for [NodeReady].
type Nodes struct {
	// Name returns the Node an agent registers; nil means the agents
	// register none, and neither the lifecycle nor NodeReady runs.
	Name func(Deps) string
	// Grace is the node monitor grace period: every 5 seconds the world,
	// as the node lifecycle controller does, sets Ready to Unknown on a
	// Node whose heartbeat Lease (kube-node-lease) was not renewed within
	// it. 0 means 40 seconds, kube-controller-manager's default.
	Grace time.Duration
	// Within is how long after its agent's client last reached the
	// apiserver again (a start, a healed partition) a Node may still be
	// Unknown. 0 means 30 seconds: nodestatus's documented bound (Ready
	// back within one retry wait, at most 5 seconds, of the first renewal
	// that succeeds), a renewal period of its default Lease (10 seconds),
	// and the world's 5-second pass, with room for a slow write.
	Within time.Duration
	// PingInterval is how often an agent that calls Deps.Ping pings: after
	// a heal of its provider link its Node may stay Unknown one
	// PingInterval longer than Within, until its next ping succeeds and
	// its heartbeats resume.
	PingInterval time.Duration
}

// Gate describes the agents' releases and their version gate, for
// [NoIncompatibleServing] and for RollingUpgrade.
type Gate struct {
	// Releases are the releases the fleet runs, oldest first: every agent
	// starts at the first, and RollingUpgrade restarts one agent at the
	// next release above its own. Deps.Release is the current run's.
	Releases []versiongate.Version
	// MinimumCompatible returns the lowest node release that can serve on
	// what a leader of release r reconciles; nil means r itself.
	MinimumCompatible func(r versiongate.Release) versiongate.Release
}

func (g Gate) minimum(r versiongate.Release) versiongate.Release {
	if g.MinimumCompatible == nil {
		return r
	}
	return g.MinimumCompatible(r)
}

// serving is what the runs told the world through Deps.Serving.
type serving struct {
	mu      sync.Mutex
	run     map[*slot]*int                 // the current run's token, while it lasts
	on      map[*slot]bool                 // the current run serves
	release map[string]versiongate.Release // each agent's current run's
}

// servingFunc starts s's run at release r and returns its Deps.Serving:
// it counts only while that run lasts.
func (w *world) servingFunc(s *slot, r versiongate.Release) func(bool) {
	tok := new(int)
	w.serving.mu.Lock()
	if w.serving.run == nil {
		w.serving.run, w.serving.on, w.serving.release = map[*slot]*int{}, map[*slot]bool{}, map[string]versiongate.Release{}
	}
	w.serving.run[s], w.serving.on[s], w.serving.release[s.name] = tok, false, r
	w.serving.mu.Unlock()
	return func(on bool) {
		w.serving.mu.Lock()
		changed := w.serving.run[s] == tok && w.serving.on[s] != on
		if changed {
			w.serving.on[s] = on
		}
		w.serving.mu.Unlock()
		if changed {
			w.tl.add(s.name, "serving=%v (release %s)", on, r)
		}
	}
}

// notServing ends s's run's serving, when it stops.
func (w *world) notServing(s *slot) {
	w.serving.mu.Lock()
	delete(w.serving.run, s)
	delete(w.serving.on, s)
	w.serving.mu.Unlock()
}

// checkServing is called at every write that passes the fence, by agent
// (the leader at work): no agent may serve below the minimum compatible
// release of the writer's release.
func (w *world) checkServing(agent string) {
	if len(w.cfg.Gate.Releases) == 0 {
		return
	}
	w.serving.mu.Lock()
	r, ok := w.serving.release[agent]
	min := w.cfg.Gate.minimum(r)
	var bad []string
	for s, on := range w.serving.on {
		if on && w.serving.release[s.name].Less(min) {
			bad = append(bad, fmt.Sprintf("%s at %s", s.name, w.serving.release[s.name]))
		}
	}
	w.serving.mu.Unlock()
	if ok && len(bad) > 0 {
		slices.Sort(bad)
		w.violate(NoIncompatibleServing, agent, "writes as leader at release %s (minimum compatible %s) while %s serves",
			r, min, strings.Join(bad, " and "))
	}
}

// lkgWatch is the wrapper of one run's checkpoint store: it writes every
// record change to the timeline and checks [LKGProven].
type lkgWatch struct {
	checkpoint.LKGStore
	w    *world
	s    *slot
	mu   sync.Mutex
	prev checkpoint.State
	read bool
	// trial is when this run recorded the start of a trial of each
	// checkpoint ID.
	trial map[string]time.Time
}

func (w *world) watchCheckpoints(s *slot) func(checkpoint.LKGStore) checkpoint.LKGStore {
	return func(st checkpoint.LKGStore) checkpoint.LKGStore {
		return &lkgWatch{LKGStore: st, w: w, s: s, trial: map[string]time.Time{}}
	}
}

func (l *lkgWatch) State(ctx context.Context) (checkpoint.State, error) {
	st, err := l.LKGStore.State(ctx)
	if err == nil {
		l.mu.Lock()
		if !l.read {
			l.prev, l.read = st, true
			l.s.setRecord(st)
		}
		l.mu.Unlock()
	}
	return st, err
}

func (l *lkgWatch) SetState(ctx context.Context, st checkpoint.State) error {
	err := l.LKGStore.SetState(ctx, st)
	if err != nil {
		return err
	}
	now := time.Now()
	l.mu.Lock()
	prev := l.prev
	l.prev, l.read = st, true
	l.s.setRecord(st)
	started := st.Assigned != "" && st.Error == nil && st.LastKnownGood == prev.LastKnownGood &&
		(st.Assigned != prev.Assigned || st.TriesLeft < prev.TriesLeft)
	if started {
		l.trial[st.Assigned] = now
	}
	began, tried := l.trial[st.LastKnownGood]
	l.mu.Unlock()
	why := ""
	if st.Error != nil {
		why = fmt.Sprintf(", error %s: %s", st.Error.Reason, st.Error.Message)
	}
	l.w.tl.add(l.s.name, "checkpoint record: assigned %q (tries left %d), active %q, last-known-good %q%s",
		st.Assigned, st.TriesLeft, st.Active, st.LastKnownGood, why)
	trial := l.w.cfg.CheckpointTrial
	if trial < 0 || st.LastKnownGood == "" || st.LastKnownGood == prev.LastKnownGood {
		return nil
	}
	switch {
	case !tried:
		l.w.violate(LKGProven, l.s.name, "%q became last-known-good with no trial started in this run", st.LastKnownGood)
	case now.Sub(began) < minTrial(trial):
		l.w.violate(LKGProven, l.s.name, "%q became last-known-good %s after its trial started, want at least %s (its trial of %s on a clock at most %.0f%% fast)",
			st.LastKnownGood, now.Sub(began), minTrial(trial), trial, 100*DefaultMaxDrift)
	}
	return nil
}

// minTrial is the shortest a trial of d on an agent's clock may take in
// simulated time: d on a clock that runs DefaultMaxDrift fast, the most
// the packages allow. The nemesis's own Nemesis.MaxDrift does not move
// it: a drift beyond DefaultMaxDrift shortens a trial past it.
func minTrial(d time.Duration) time.Duration {
	return time.Duration(float64(d) / (1 + DefaultMaxDrift))
}

// lifecycle plays the node lifecycle controller, and checks NodeReady,
// every 5 seconds until ctx ends; meanwhile it checks TermChurn
// (watchTerms), and returns once that ended too.
func (w *world) lifecycle(ctx context.Context) {
	var terms sync.WaitGroup
	terms.Go(func() { w.watchTerms(ctx) })
	defer terms.Wait()
	if w.cfg.Nodes.Name == nil {
		return
	}
	for sleepCtx(ctx, 5*time.Second) {
		w.nodePass(ctx)
	}
}

// nodePass marks Unknown every Node whose Lease went stale, and reports a
// Node still Unknown Within after its agent reached the apiserver again.
func (w *world) nodePass(ctx context.Context) {
	now := time.Now()
	leases, err := w.observer.CoordinationV1().Leases(corev1.NamespaceNodeLease).List(ctx, metav1.ListOptions{})
	if err != nil {
		return
	}
	renewed := map[string]time.Time{}
	for _, l := range leases.Items {
		renewed[l.Name] = renewTime(&l)
	}
	for _, s := range w.agents {
		name := w.cfg.Nodes.Name(Deps{Name: s.name, Index: s.index, IP: s.ip})
		node, err := w.observer.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			continue
		}
		i := slices.IndexFunc(node.Status.Conditions, func(c corev1.NodeCondition) bool { return c.Type == corev1.NodeReady })
		if i < 0 {
			continue
		}
		ready := &node.Status.Conditions[i]
		at, ok := renewed[name]
		if ready.Status != corev1.ConditionUnknown && ok && now.Sub(at) > w.cfg.Nodes.Grace {
			ready.Status, ready.Reason = corev1.ConditionUnknown, "NodeStatusUnknown"
			ready.Message = "Kubelet stopped posting node status."
			ready.LastTransitionTime = metav1.NewTime(now)
			if _, err := w.observer.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err == nil {
				w.tl.add("lifecycle", "node %s Ready Unknown (lease renewed %s ago)", name, now.Sub(at).Round(time.Second))
			}
			continue
		}
		if ready.Status != corev1.ConditionUnknown || !s.up.Load() || s.partitioned.Load() {
			continue
		}
		reached, what, bound := s.reached.Load(), "its agent last reached the apiserver", w.cfg.Nodes.Within
		if l := s.pings.Load(); l != nil && l.pinged.Load() {
			// Its pings fail while the link is cut, and stop heartbeats.
			if l.cut.Load() {
				continue
			}
			if h := l.healed.Load(); h > reached {
				reached, what = h, "its agent's provider link, which its pings check, healed"
				bound += w.cfg.Nodes.PingInterval
			}
		}
		if since := now.Sub(time.Unix(0, reached)); since > bound {
			w.violate(NodeReady, s.name, "node %s is still Ready Unknown %s after %s (bound %s)",
				name, since.Round(time.Second), what, bound)
			return
		}
	}
}

func renewTime(l *coordinationv1.Lease) time.Time {
	if l.Spec.RenewTime != nil {
		return l.Spec.RenewTime.Time
	}
	if l.Spec.AcquireTime != nil {
		return l.Spec.AcquireTime.Time
	}
	return l.CreationTimestamp.Time
}

// setRecord keeps st as the latest checkpoint record of s.
func (s *slot) setRecord(st checkpoint.State) {
	s.recordMu.Lock()
	s.record = st
	s.recordMu.Unlock()
}

func (s *slot) lastRecord() checkpoint.State {
	s.recordMu.Lock()
	defer s.recordMu.Unlock()
	return s.record
}
