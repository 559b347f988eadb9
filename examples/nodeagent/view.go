package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/reconkit/reconkit/checkpoint"
	"github.com/reconkit/reconkit/election"
	"github.com/reconkit/reconkit/nodestatus"
	"github.com/reconkit/reconkit/versiongate"
)

// printer writes the narrative, the live view and the verdict to stdout.
// On a terminal the view is redrawn in place with the latest narrative
// lines under it; otherwise every line is printed once, in order.
type printer struct {
	w     io.Writer
	tty   bool
	start time.Time

	mu      sync.Mutex
	live    bool     // the view owns the terminal
	events  []string // the latest narrative lines, for the redraw
	undrawn []string // narrative lines no redraw has shown yet
}

func (p *printer) stamp() string {
	return fmt.Sprintf("%6.1fs", time.Since(p.start).Seconds())
}

// say prints a narrative line.
func (p *printer) say(format string, args ...any) {
	line := p.stamp() + "  " + fmt.Sprintf(format, args...)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.live {
		p.undrawn = append(p.undrawn, line)
		p.events = append(p.events, line)
		if len(p.events) > 12 {
			p.events = p.events[len(p.events)-12:]
		}
		return
	}
	fmt.Fprintln(p.w, line)
}

// verdict prints the scenario's verdict line, unprefixed so that it is
// easy to find.
func (p *printer) verdict(line string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintln(p.w, line)
}

// snapshot is one look at the whole system.
type snapshot struct {
	Leader  election.LeaderInfo
	Status  string
	LB      lbSummary
	Fence   uint64
	Refused int
	Agents  []agentState
	Nodes   map[string]nodeView
}

// nodeView is one Node as the Kubernetes API has it.
type nodeView struct {
	Ready, ConfigOK, Gated string // status/reason of each condition
	// LeaseFresh: the view saw the Node's heartbeat Lease renewed within
	// its duration, on the view's clock.
	LeaseFresh bool
	// LeaseAge is the time since the Lease's renewTime, as written by
	// the agent's clock (the same machine's here): shown, not judged.
	LeaseAge time.Duration
}

// view collects snapshots and shows them.
type view struct {
	env *env
	p   *printer
	// leases judges the Nodes' heartbeat Leases alone (no condition,
	// taint or label): the view's LeaseFresh.
	leases *nodestatus.NodeHealth

	mu       sync.Mutex
	leader   election.LeaderInfo
	leaderCh chan struct{} // closed and replaced when leader changes
}

func newView(e *env, p *printer) *view {
	return &view{env: e, p: p, leases: nodestatus.NewNodeHealth(nodestatus.HealthRule{
		Conditions:    []corev1.NodeConditionType{},
		ExcludeTaints: []string{},
		ExcludeLabels: []string{},
	})}
}

// currentLeader returns the leader the election shows, and a channel
// closed when that changes.
func (v *view) currentLeader() (election.LeaderInfo, <-chan struct{}) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.leaderCh == nil {
		v.leaderCh = make(chan struct{})
	}
	return v.leader, v.leaderCh
}

// run observes the election and shows the system until ctx ends.
func (v *view) run(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Go(func() {
		for info := range v.env.coord.observer().Observe(ctx) {
			v.mu.Lock()
			v.leader = info
			if v.leaderCh != nil {
				close(v.leaderCh)
				v.leaderCh = nil
			}
			v.mu.Unlock()
			v.env.changed()
		}
	})
	defer wg.Wait()

	// The agents wake the view at every change of theirs (configuration,
	// readiness, gate phase, leadership); the tick catches what only time
	// or other writers change (Node conditions and leases on the API
	// server, pending load-balancer objects), and paces the terminal's
	// redraw.
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var lastKey string
	var lastDraw time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-v.env.changes:
		}
		s := v.collect(ctx)
		if ctx.Err() != nil {
			return
		}
		key := s.line(false)
		if v.p.tty {
			if key != lastKey || time.Since(lastDraw) >= time.Second {
				v.draw(s)
				lastDraw = time.Now()
			}
		} else if key != lastKey {
			v.p.say("%s", s.line(true))
		}
		lastKey = key
	}
}

// collect reads the election, the gate status, the load balancer, the
// agents and the Nodes.
func (v *view) collect(ctx context.Context) snapshot {
	e := v.env
	var s snapshot
	v.mu.Lock()
	s.Leader = v.leader
	v.mu.Unlock()

	s.Status = "none"
	if st, err := e.coord.status().ReadStatus(ctx); err != nil {
		s.Status = "unreadable"
	} else if st.Value != nil {
		if st, err := versiongate.DecodeStatus(st.Value); err != nil {
			s.Status = "corrupt"
		} else {
			s.Status = fmt.Sprintf("%s@%s/min%s", st.State, st.Version.Release, st.MinimumCompatibleRelease)
		}
	}
	s.LB = summarizeLB(e.lb.eng.Objects())
	s.Fence, s.Refused = e.lb.state()
	for _, a := range e.agentList() {
		s.Agents = append(s.Agents, a.snapshot())
	}

	s.Nodes = map[string]nodeView{}
	nodes, err := e.kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{LabelSelector: nodeLabel})
	if err != nil {
		return s
	}
	leases := map[string]*coordinationv1.Lease{}
	if ls, err := e.kube.CoordinationV1().Leases(corev1.NamespaceNodeLease).List(ctx, metav1.ListOptions{}); err == nil {
		v.leases.ObserveLeases(ls.Items)
		for i := range ls.Items {
			leases[ls.Items[i].Name] = &ls.Items[i]
		}
	}
	now := time.Now()
	for _, n := range nodes.Items {
		nv := nodeView{
			Ready:    conditionText(n.Status.Conditions, corev1.NodeReady),
			ConfigOK: conditionText(n.Status.Conditions, checkpoint.ConditionConfigOK),
			Gated:    conditionText(n.Status.Conditions, conditionGated),
		}
		nv.LeaseFresh, _ = v.leases.Healthy(&n)
		if l := leases[n.Name]; l != nil && l.Spec.RenewTime != nil {
			nv.LeaseAge = now.Sub(l.Spec.RenewTime.Time)
		}
		s.Nodes[n.Name] = nv
	}
	return s
}

func conditionText(conds []corev1.NodeCondition, t corev1.NodeConditionType) string {
	for _, c := range conds {
		if c.Type == t {
			if c.Reason != "" {
				return string(c.Status) + "/" + c.Reason
			}
			return string(c.Status)
		}
	}
	return "-"
}

// line is the snapshot on one line, for logs. Without details it leaves
// out what changes all the time, so that it serves to detect changes.
func (s snapshot) line(details bool) string {
	var b strings.Builder
	leader := "none"
	if !s.Leader.IsZero() {
		leader = fmt.Sprintf("%s#%d", s.Leader.Identity, s.Leader.Token)
	}
	fmt.Fprintf(&b, "VIEW leader=%s status=%s lb=%dobj", leader, s.Status, s.LB.Objects)
	if s.LB.Pending > 0 {
		fmt.Fprintf(&b, "(%d pending)", s.LB.Pending)
	}
	fmt.Fprintf(&b, " binds=%s targets=%s", listOrDash(s.LB.Binds), listOrDash(s.LB.Targets))
	if s.Refused > 0 {
		fmt.Fprintf(&b, " fenced=%d", s.Refused)
	}
	for _, a := range s.Agents {
		fmt.Fprintf(&b, " | %s %s %s", a.Name, a.Release, agentActivity(a))
		if a.Ready {
			b.WriteString(" ready")
		}
		fmt.Fprintf(&b, " cfg=%s", strings.ReplaceAll(a.Config, " ", ":"))
		if n, ok := s.Nodes[a.Name]; ok {
			fmt.Fprintf(&b, " node=%s,%s,%s", shortCond("Ready", n.Ready), shortCond("ConfigOK", n.ConfigOK), shortCond("Gate", n.Gated))
			if !n.LeaseFresh {
				b.WriteString(",lease-STALE")
			}
		}
	}
	return b.String()
}

// shortCond shows a condition as its name when True, and with its
// status and reason otherwise.
func shortCond(name, text string) string {
	if strings.HasPrefix(text, "True") {
		return name
	}
	return name + "=" + text
}

func agentActivity(a agentState) string {
	if !a.Running {
		if a.Stopped != "" {
			return strings.ToUpper(a.Stopped)
		}
		return "STARTING"
	}
	if a.Leading {
		if len(a.Blocking) > 0 {
			return "LEADER/" + string(a.Phase) + "(waits for " + strings.Join(a.Blocking, ",") + ")"
		}
		return "LEADER/" + string(a.Phase)
	}
	return string(a.Phase)
}

func listOrDash(l []string) string {
	if len(l) == 0 {
		return "-"
	}
	return strings.Join(l, ",")
}

// draw redraws the terminal: the system on top, the narrative below.
func (v *view) draw(s snapshot) {
	e := v.env
	var b strings.Builder
	b.WriteString("\x1b[H\x1b[2J")
	kube := "local kube-apiserver"
	switch e.kubeMode {
	case kubeMemory:
		kube = "IN-MEMORY Kubernetes API (kubefake)"
	case kubeExternal:
		kube = "Kubernetes " + e.opts.kubeconfig
	}
	fmt.Fprintf(&b, "nodeagent · %d agents · %s · %s · in-memory load balancer · %s\n\n", len(s.Agents), kube, e.coord.where(), v.p.stamp())
	leader := "none"
	if !s.Leader.IsZero() {
		leader = fmt.Sprintf("%s (fencing token %d)", s.Leader.Identity, s.Leader.Token)
	}
	fmt.Fprintf(&b, "  leader      %s\n", leader)
	fmt.Fprintf(&b, "  gate status %s\n", s.Status)
	fmt.Fprintf(&b, "  lb          %d objects, %d pending, %d failed; binds %s; targets %s; highest token %d, %d stale writes refused\n\n",
		s.LB.Objects, s.LB.Pending, s.LB.Failed, listOrDash(s.LB.Binds), listOrDash(s.LB.Targets), s.Fence, s.Refused)
	fmt.Fprintf(&b, "  %-8s %-8s %-22s %-6s %-28s %-22s %-34s %-28s %s\n", "AGENT", "RELEASE", "GATE", "READY", "CONFIG", "node Ready", "node ConfigOK", "node VersionGateReady", "LEASE")
	for _, a := range s.Agents {
		ready := "no"
		if a.Ready {
			ready = "yes"
		}
		n := s.Nodes[a.Name]
		lease := "-"
		if n.LeaseAge > 0 {
			lease = fmt.Sprintf("%.1fs ago", n.LeaseAge.Seconds())
			if !n.LeaseFresh {
				lease += " STALE"
			}
		}
		activity := agentActivity(a)
		if len(a.Blocking) > 0 {
			activity = "LEADER/" + string(a.Phase)
		}
		fmt.Fprintf(&b, "  %-8s %-8s %-22s %-6s %-28s %-22s %-34s %-28s %s\n", a.Name, a.Release, activity, ready, a.Config, n.Ready, n.ConfigOK, n.Gated, lease)
	}
	for _, a := range s.Agents {
		if a.Leading && len(a.Blocking) > 0 {
			fmt.Fprintf(&b, "\n  %s's gate waits for %s to leave before it reconciles %s\n", a.Name, strings.Join(a.Blocking, ", "), a.Release)
		} else if a.Leading && a.Reconcile != "" {
			fmt.Fprintf(&b, "\n  last reconcile by %s: %s\n", a.Name, a.Reconcile)
		}
	}
	b.WriteString("\n")
	v.p.mu.Lock()
	v.p.undrawn = nil
	for _, ev := range v.p.events {
		b.WriteString(ev + "\n")
	}
	fmt.Fprint(v.p.w, b.String())
	v.p.mu.Unlock()
}
