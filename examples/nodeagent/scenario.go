package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/reconkit/reconkit/checkpoint"
	"github.com/reconkit/reconkit/election"
	"github.com/reconkit/reconkit/lbrecon"
	"github.com/reconkit/reconkit/versiongate"
)

// scenario drives the cluster through one story and judges it.
type scenario struct {
	env   *env
	view  *view
	p     *printer
	start time.Time
}

// waitFor polls fresh snapshots until ok holds, and fails with what it
// waited for when ctx ends.
func (sc *scenario) waitFor(ctx context.Context, what string, ok func(snapshot) bool) (snapshot, error) {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		s := sc.view.collect(ctx)
		if ctx.Err() == nil && ok(s) {
			return s, nil
		}
		select {
		case <-ctx.Done():
			return s, fmt.Errorf("waiting for %s: %w (last view: %s)", what, ctx.Err(), s.line(true))
		case <-t.C:
		}
	}
}

// pause holds the scenario between steps for a person to follow.
func (sc *scenario) pause(ctx context.Context) error {
	t := time.NewTimer(sc.env.opts.pause)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// steady holds when every running agent is ready, one of them leads, the
// gate status is done and the load balancer targets exactly the running
// agents with nothing pending.
func steady(s snapshot) bool {
	var running []string
	leaderRuns := false
	for _, a := range s.Agents {
		if !a.Running {
			continue
		}
		if !a.Ready {
			return false
		}
		running = append(running, a.Name)
		if a.Name == s.Leader.Identity && a.Leading && a.Phase == versiongate.PhaseDone {
			leaderRuns = true
		}
	}
	return leaderRuns && strings.HasPrefix(s.Status, "done@") && s.LB.Pending == 0 && slices.Equal(s.LB.Targets, running)
}

func (sc *scenario) steady(ctx context.Context) (snapshot, error) {
	s, err := sc.waitFor(ctx, "a steady cluster (all ready, a leader done, every agent a load-balancer target)", steady)
	if err == nil {
		sc.p.say("steady: leader %s (token %d), status %s, targets %s", s.Leader.Identity, s.Leader.Token, s.Status, listOrDash(s.LB.Targets))
	}
	return s, err
}

// failover kills the leader and measures how long until another agent
// leads, then waits for the successor to drop the dead node from the load
// balancer.
func (sc *scenario) failover(ctx context.Context) (string, error) {
	s, err := sc.steady(ctx)
	if err != nil {
		return "", err
	}
	old := s.Leader
	victim := sc.env.agentByName(old.Identity)
	if victim == nil {
		return "", fmt.Errorf("leader %q is not one of the agents", old.Identity)
	}
	sc.p.say("SCENARIO failover: killing the leader %s; %s is cut first, so its term (TTL %v) is never released", victim.name, sc.env.coord.traffic(), sc.env.opts.electionTTL)
	killed := time.Now()
	victim.kill()

	var next election.LeaderInfo
	for {
		var changed <-chan struct{}
		next, changed = sc.view.currentLeader()
		if !next.IsZero() && next.Identity != old.Identity {
			break
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("no successor to %s: %w", old.Identity, ctx.Err())
		case <-changed:
		}
	}
	took := time.Since(killed)
	sc.p.say("failover: %s leads after %.1fs (fencing token %d, was %d)", next.Identity, took.Seconds(), next.Token, old.Token)
	if next.Token <= old.Token {
		return "", fmt.Errorf("successor token %d is not above the old leader's %d", next.Token, old.Token)
	}

	sc.p.say("failover: waiting for %s's Node lease to go stale and the new leader to drop it from the load balancer", victim.name)
	s, err = sc.waitFor(ctx, "the successor to converge the load balancer without "+victim.name, func(s snapshot) bool {
		return steady(s) && s.Leader.Identity == next.Identity && !slices.Contains(s.LB.Targets, victim.name)
	})
	if err != nil {
		return "", err
	}
	sc.p.say("failover: load balancer targets %s", listOrDash(s.LB.Targets))
	return fmt.Sprintf("killed=%s successor=%s took=%.1fs token=%d->%d targets=%s", victim.name, next.Identity, took.Seconds(), old.Token, next.Token, listOrDash(s.LB.Targets)), nil
}

// upgrade replaces every agent, one at a time, with one of the newer
// release; the gate keeps the new leader from reconciling the new state
// while older nodes remain.
func (sc *scenario) upgrade(ctx context.Context) (string, error) {
	e := sc.env
	newV, err := versiongate.ParseVersion(e.opts.upgradeTo)
	if err != nil {
		return "", fmt.Errorf("--upgrade-to: %w", err)
	}
	oldV, err := versiongate.ParseVersion(e.opts.release)
	if err != nil {
		return "", err
	}
	if !oldV.Release.Less(newV.Release) {
		return "", fmt.Errorf("--upgrade-to %s is not above --release %s", newV, oldV)
	}
	restricts := minimumCompatible(oldV.Release).Less(minimumCompatible(newV.Release))
	if _, err := sc.steady(ctx); err != nil {
		return "", err
	}
	sc.p.say("SCENARIO upgrade: rolling %s -> %s one agent at a time; %s needs nodes at %s or above",
		oldV, newV, newV.Release, minimumCompatible(newV.Release))
	restricted := 0
	for i := 1; i <= e.opts.agents; i++ {
		a := e.agentList()[i-1]
		sc.p.say("upgrade: stopping %s (%s)", a.name, a.version)
		a.stop()
		na, err := e.startAgent(ctx, i, newV)
		if err != nil {
			return "", err
		}
		if _, err := sc.waitFor(ctx, na.name+" at "+newV.String()+" to pass WaitReady", func(snapshot) bool { return na.snapshot().Ready }); err != nil {
			return "", err
		}
		sc.p.say("upgrade: %s runs %s and passed WaitReady (the status still admits it)", na.name, newV)
		if i == e.opts.agents || !restricts {
			continue
		}
		s, err := sc.waitFor(ctx, "the new leader to restrict", func(s snapshot) bool {
			for _, a := range s.Agents {
				if a.Leading && a.Release == newV.String() && a.Phase == versiongate.PhaseRestricting && len(a.Blocking) == e.opts.agents-i {
					return true
				}
			}
			return false
		})
		if err != nil {
			return "", err
		}
		for _, a := range s.Agents {
			if a.Leading {
				sc.p.say("upgrade: gate of leader %s is restricting: it waits for %s before it reconciles %s", a.Name, strings.Join(a.Blocking, ", "), newV.Release)
			}
		}
		restricted++
		if err := sc.pause(ctx); err != nil {
			return "", err
		}
	}
	want := fmt.Sprintf("done@%s/min%s", newV.Release, minimumCompatible(newV.Release))
	s, err := sc.waitFor(ctx, "status "+want+" and a steady cluster", func(s snapshot) bool {
		return steady(s) && s.Status == want
	})
	if err != nil {
		return "", err
	}
	sc.p.say("upgrade: finished; status %s, binds %s", s.Status, listOrDash(s.LB.Binds))
	if restricts && restricted == 0 {
		return "", fmt.Errorf("the gate never restricted")
	}
	return fmt.Sprintf("release=%s leader=%s restricted-steps=%d status=%s binds=%s took=%.1fs", newV, s.Leader.Identity, restricted, s.Status, listOrDash(s.LB.Binds), time.Since(sc.start).Seconds()), nil
}

// badConfig assigns a good configuration, then one that does not
// validate, then one that validates but fails its trial.
func (sc *scenario) badConfig(ctx context.Context) (string, error) {
	e := sc.env
	if _, err := sc.steady(ctx); err != nil {
		return "", err
	}
	all := func(ok func(agentState) bool) func(snapshot) bool {
		return func(s snapshot) bool {
			for _, a := range s.Agents {
				if !ok(a) {
					return false
				}
			}
			return len(s.Agents) > 0
		}
	}

	good := localConfig()
	good.Addresses = append(good.Addresses, "192.0.2.11")
	good.MaxConnections = 200
	goodID, err := e.assigner.assign(ctx, mustJSON(good))
	if err != nil {
		return "", err
	}
	sc.p.say("SCENARIO bad-config: assigned %s (adds external address 192.0.2.11, maxConnections 200); trial %v", goodID, e.opts.trial)
	if _, err := sc.waitFor(ctx, goodID+" on trial", all(func(a agentState) bool { return a.CfgID == goodID })); err != nil {
		return "", err
	}
	sc.p.say("bad-config: every agent runs %s on trial", goodID)
	s, err := sc.waitFor(ctx, goodID+" last-known-good and on the load balancer", func(s snapshot) bool {
		return all(func(a agentState) bool { return a.CfgPhase == checkpoint.PhaseLastKnownGood && a.CfgID == goodID })(s) &&
			slices.Contains(s.LB.Binds, "192.0.2.11:80") && steady(s)
	})
	if err != nil {
		return "", err
	}
	sc.p.say("bad-config: %s passed its trial on every agent; binds %s", goodID, listOrDash(s.LB.Binds))

	invalid := `{"loadBalancer":"lb-1","externalAddresses":["192.0.2.10"],"ports":[{"name":"http","nodePort":80,"externalPort":80}],"maxConnections":200}`
	invalidID, err := e.assigner.assign(ctx, invalid)
	if err != nil {
		return "", err
	}
	sc.p.say("bad-config: assigned %s with nodePort 80, outside the node port range", invalidID)
	s, err = sc.waitFor(ctx, invalidID+" to be refused", all(func(a agentState) bool {
		return a.ConfigOK.Reason == checkpoint.ReasonValidateFailed && a.CfgID == goodID
	}))
	if err != nil {
		return "", err
	}
	rejected := s.Agents[0].ConfigOK
	sc.p.say("bad-config: refused by every agent: ConfigOK=%s %s: %s", rejected.Status, rejected.Reason, rejected.Message)

	failing := good
	failing.MaxConnections = 10
	failingID, err := e.assigner.assign(ctx, mustJSON(failing))
	if err != nil {
		return "", err
	}
	sc.p.say("bad-config: assigned %s with maxConnections 10: it validates, but each agent serves more than 10 connections", failingID)
	s, err = sc.waitFor(ctx, failingID+" to be rolled back on every agent and on every Node", func(s snapshot) bool {
		return all(func(a agentState) bool {
			n := s.Nodes[a.Name]
			return a.CfgPhase == checkpoint.PhaseRolledBack && a.CfgID == goodID &&
				a.ConfigOK.Reason == checkpoint.ReasonProbeFailed && n.ConfigOK == "False/"+checkpoint.ReasonProbeFailed
		})(s)
	})
	if err != nil {
		return "", err
	}
	rb := s.Agents[0].ConfigOK
	sc.p.say("bad-config: rolled back to %s on every agent: ConfigOK=%s %s: %s", goodID, rb.Status, rb.Reason, rb.Message)
	return fmt.Sprintf("rejected=%s rolled-back=%s running=%s reason=%q", rejected.Reason, rb.Reason, goodID, rb.Message), nil
}

// fence shows a deposed leader's late write refused by the load
// balancer's store. The leader passes its check before a write and pauses
// there; meanwhile its election traffic is cut, so its term expires (its
// etcd session on the server, or its Lease unrenewed) and another agent
// leads with a higher token and writes. Then the
// old leader resumes: its write reaches the store, which refuses it by its
// token, in the same critical section as the write.
func (sc *scenario) fence(ctx context.Context) (string, error) {
	e := sc.env
	var (
		s      snapshot
		old    election.LeaderInfo
		victim *agent
		hold   *writeHold
		bind   lbrecon.Object
	)
	// A leader that loses its term on its own before its next write (a
	// starved machine lets its renewals lapse) never reaches the hold: the
	// scenario then starts again with the leader that followed it.
	for attempt := 1; ; attempt++ {
		var err error
		s, err = sc.steady(ctx)
		if err != nil {
			return "", err
		}
		old = s.Leader
		victim = e.agentByName(old.Identity)
		if victim == nil {
			return "", fmt.Errorf("leader %q is not one of the agents", old.Identity)
		}
		hold = newWriteHold()
		victim.hold.Store(hold)
		// Drift the leader will repair at its next reconcile: a bind
		// deleted behind its back.
		objs := e.lb.eng.Objects()
		i := slices.IndexFunc(objs, func(o lbrecon.Object) bool { return o.Kind == lbrecon.KindBind })
		if i < 0 {
			victim.hold.CompareAndSwap(hold, nil)
			return "", fmt.Errorf("no bind on the load balancer")
		}
		bind = objs[i]
		e.lb.eng.DeleteObject(bind.Key())
		sc.p.say("SCENARIO fence: deleted bind %s behind the leader's back; the next write of leader %s (token %d) pauses after its check passes", bind.Name, victim.name, old.Token)
		held, err := sc.waitHeld(ctx, hold, victim)
		if err != nil {
			victim.hold.CompareAndSwap(hold, nil)
			return "", err
		}
		if held {
			break
		}
		victim.hold.CompareAndSwap(hold, nil)
		if attempt == 5 {
			return "", fmt.Errorf("five leaders in a row lost their terms before their next write")
		}
		sc.p.say("fence: %s stopped leading before its next write; again with the next leader", victim.name)
	}
	sc.p.say("fence: %s passed its check and paused before %s %s; cutting %s so its term (TTL %v) expires", victim.name, hold.verb, hold.obj.Name, e.coord.traffic(), e.opts.electionTTL)
	victim.cut()
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			close(hold.release)
		}
	}
	defer resume()

	s, err := sc.waitFor(ctx, "a successor with a higher token to write to the load balancer", func(s snapshot) bool {
		return !s.Leader.IsZero() && s.Leader.Identity != old.Identity && s.Leader.Token > old.Token && s.Fence >= s.Leader.Token
	})
	if err != nil {
		return "", err
	}
	next := s.Leader
	sc.p.say("fence: %s leads with token %d and wrote to the load balancer (its fence is at %d); resuming %s", next.Identity, next.Token, s.Fence, victim.name)
	resume()
	// The store judges the write before the deposed leader's reconcile
	// returns, and the gate lets its term go only after that.
	_, err = sc.waitFor(ctx, "the resumed write to be judged and "+victim.name+" to stop leading", func(s snapshot) bool {
		return s.Refused > 0 || !victim.snapshot().Leading
	})
	if err != nil {
		return "", err
	}
	applied, refused := e.lb.history()
	if len(refused) == 0 {
		if slices.ContainsFunc(applied, func(w fencedWrite) bool { return w.Token == old.Token && w.Highest > old.Token }) {
			return "", fmt.Errorf("the store applied the deposed leader's write with token %d after a higher token wrote", old.Token)
		}
		return "", fmt.Errorf("the deposed leader's %s %s never reached the store: nothing was refused at apply time", hold.verb, hold.obj.Name)
	}
	r := refused[0]
	if r.Token != old.Token || r.Verb != hold.verb || r.Name != hold.obj.Name {
		return "", fmt.Errorf("the store refused %+v, not the held write %s %s with token %d", r, hold.verb, hold.obj.Name, old.Token)
	}
	sc.p.say("fence: the store refused %s %s with token %d (highest %d) at apply time", r.Verb, r.Name, r.Token, r.Highest)
	// The checker reads the store's history: once a token has written,
	// no lower one ever writes again.
	var highest uint64
	for _, w := range applied {
		if w.Token < highest {
			return "", fmt.Errorf("the store applied %s %s with token %d after token %d had written", w.Verb, w.Name, w.Token, highest)
		}
		highest = max(highest, w.Token)
	}

	victim.restore()
	sc.p.say("fence: %s's traffic restored; waiting for the cluster to settle with one bind per address and port", victim.name)
	s, err = sc.waitFor(ctx, "a steady cluster under "+next.Identity+", "+victim.name+" serving again and no longer leading", func(s snapshot) bool {
		v := victim.snapshot()
		return steady(s) && s.Leader.Identity == next.Identity && v.Running && v.Ready && !v.Leading
	})
	if err != nil {
		return "", err
	}
	binds := 0
	for _, o := range e.lb.eng.Objects() {
		if o.Kind == lbrecon.KindBind && o.Name == bind.Name {
			binds++
		}
	}
	if binds != 1 {
		return "", fmt.Errorf("%d binds named %s, want 1", binds, bind.Name)
	}
	return fmt.Sprintf("deposed=%s token=%d successor=%s token=%d refused=%s:%s stale-writes-applied=0 writes=%d binds=%s",
		victim.name, old.Token, next.Identity, next.Token, r.Verb, r.Name, len(applied), listOrDash(s.LB.Binds)), nil
}

// waitHeld waits until victim's next write reaches hold (true), or victim
// no longer leads before it does (false), or ctx ends.
func (sc *scenario) waitHeld(ctx context.Context, hold *writeHold, victim *agent) (bool, error) {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-hold.held:
			return true, nil
		case <-ctx.Done():
			return false, fmt.Errorf("waiting for %s to write: %w", victim.name, ctx.Err())
		case <-tick.C:
			if victim.snapshot().Leading {
				continue
			}
			select {
			case <-hold.held:
				return true, nil
			default:
				return false, nil
			}
		}
	}
}
