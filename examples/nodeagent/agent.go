package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/reconkit/reconkit/backoff"
	"github.com/reconkit/reconkit/checkpoint"
	"github.com/reconkit/reconkit/checkpoint/configmapsource"
	"github.com/reconkit/reconkit/election"
	"github.com/reconkit/reconkit/events"
	"github.com/reconkit/reconkit/healthz"
	"github.com/reconkit/reconkit/lbrecon"
	"github.com/reconkit/reconkit/lbrecon/nodetargets"
	"github.com/reconkit/reconkit/nodestatus"
	"github.com/reconkit/reconkit/versiongate"
)

// agentState is what the live view shows of one agent.
type agentState struct {
	Name      string
	Release   string
	Running   bool
	Stopped   string            // why it stopped: "stopped", "killed", or an error
	Ready     bool              // passed WaitReady
	Phase     versiongate.Phase // version gate phase
	Leading   bool
	Config    string // checkpoint phase and ID, for the view
	CfgPhase  checkpoint.Phase
	CfgID     string
	Blocking  []string // nodes the leading gate waits for
	ConfigOK  checkpoint.Condition
	Reconcile string // last reconcile result, on the leader
}

// agent is one node agent: checkpoint, nodestatus, versiongate, the
// election and lbrecon, wired together.
type agent struct {
	name    string
	index   int
	version versiongate.Version
	env     *env
	log     logr.Logger

	member   *member // elector and gate store; its links are cut by kill and by the fence scenario
	hooks    hooks   // metrics, labelled with the agent's name
	events   events.Recorder
	elector  agentElector
	ctrl     *checkpoint.Controller[agentConfig]
	provider *nodestatus.Provider // the Node's conditions: ConfigOK and VersionGateReady
	nodes    *nodestatus.NodeController
	gate     *versiongate.Gate
	targets  *nodestatus.NodeHealth // which Nodes take traffic, judged on this agent's clock

	ctx    context.Context // ends when the agent stops or is killed
	cancel context.CancelFunc
	done   chan struct{}
	hold   atomic.Pointer[writeHold] // armed by the fence scenario

	lbMu sync.Mutex                      // serialises reconcileLB
	lbr  *lbrecon.LoadBalancerReconciler // one per load balancer, kept across terms

	mu    sync.Mutex
	state agentState
}

// load is the agent's simulated number of connections; a configuration
// whose maxConnections is below it fails its trial.
func (a *agent) load() int { return 40 + 5*a.index }

func newAgent(e *env, index int, version versiongate.Version) *agent {
	name := fmt.Sprintf("agent-%d", index)
	a := &agent{name: name, index: index, version: version, env: e, done: make(chan struct{})}
	a.log = e.log.WithName(name)
	a.state = agentState{Name: name, Release: version.String(), Phase: versiongate.PhaseIdle}
	return a
}

// start builds the agent's parts and runs them until ctx ends or stop or
// kill is called.
func (a *agent) start(ctx context.Context) (err error) {
	o := a.env.opts
	if a.hooks, err = a.env.ops.hooksFor(a.name); err != nil {
		return err
	}
	if a.env.events != nil { // none in the fleet simulator
		a.events = a.env.events.forNode(a.name)
	}
	if a.member, err = a.env.coord.join(a.name, a.hooks, a.events); err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = a.member.close()
		}
	}()
	a.elector = a.member.elector
	// A Node takes traffic while Ready and VersionGateReady are True, its
	// heartbeat Lease was seen renewing within its duration, and it is
	// neither unreachable nor about to be removed. The rule's default
	// taints also hold node.kubernetes.io/not-ready, which admission puts
	// on every new Node and only the node lifecycle controller takes off:
	// the local apiserver runs none, and Ready=True says as much.
	a.targets = nodestatus.NewNodeHealth(nodestatus.HealthRule{
		Conditions:    []corev1.NodeConditionType{corev1.NodeReady, conditionGated},
		ExcludeTaints: []string{corev1.TaintNodeUnreachable, nodestatus.TaintToBeDeletedByClusterAutoscaler},
	})

	a.provider = nodestatus.NewProvider(nodestatus.ProviderConfig{Ping: a.env.ping})
	a.provider.SetCondition(gatedCondition(false, "WaitingForReconciler", "waiting for a reconciler status that admits release "+a.version.Release.String()))
	store, err := checkpoint.NewFS(checkpoint.FSConfig{Dir: filepath.Join(a.env.stateDir, a.name), FS: a.env.fs})
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = store.Close()
		}
	}()
	source, err := configmapsource.New(configmapsource.Config{Client: a.env.kube, Namespace: o.namespace, Name: configMapName, Key: configMapKey, Clock: a.env.clock, Rand: randOf(a.env.rand, "configmapsource")})
	if err != nil {
		return err
	}
	a.ctrl, err = checkpoint.New(checkpoint.Config[agentConfig]{
		Store:         a.env.observeStore(store),
		Parse:         parseConfig,
		Validate:      validateConfig,
		Local:         localConfig(),
		TrialDuration: o.trial,
		CheckInterval: o.trial / 6,
		Rand:          randOf(a.env.rand, "checkpoint"),
		Probe:         a.probe,
		OnStatus:      a.onConfigStatus,
		Source:        source,
		Conditions:    a.provider,
		Metrics:       a.hooks.Checkpoint,
		Events:        a.events,
		Clock:         a.env.clock,
	})
	if err != nil {
		return err
	}
	cfg := nodeControllerConfig(a.env.kube, agentNode(a.name, a.index, a.version.Release, a.env.taint), a.provider, o.nodeLease)
	cfg.Metrics, cfg.Events, cfg.Clock, cfg.Rand = a.hooks.Nodestatus, a.events, a.env.clock, randOf(a.env.rand, "nodestatus")
	if a.env.ping != nil {
		cfg.PingFailure = nodestatus.PingFailureStopHeartbeat
	}
	if a.nodes, err = nodestatus.New(cfg); err != nil {
		return err
	}
	reconciler := versiongate.Release{Major: 1}
	if o.ownReconciler {
		reconciler = a.version.Release
	}
	a.gate, err = versiongate.New(versiongate.Config{
		Store:                    a.member.store,
		NodeID:                   a.name,
		Version:                  a.version,
		MinimumReconcilerRelease: reconciler,
		MinimumCompatibleRelease: minimumCompatible(a.version.Release),
		RecordTTL:                o.recordTTL,
		Candidate:                a.elector,
		Reconcile:                a.reconcile,
		SettleTime:               o.settle,
		ReconcileInterval:        o.reconcileInterval,
		Metrics:                  a.hooks.Versiongate,
		Clock:                    a.env.clock,
		RecordClock:              a.env.clock,
		Rand:                     randOf(a.env.rand, "versiongate"),
		Events:                   a.events,
	})
	if err != nil {
		return err
	}
	if err := a.serveHealth(); err != nil {
		return err
	}

	a.ctx, a.cancel = context.WithCancel(logr.NewContext(ctx, a.log))
	ctx = a.ctx
	a.setState(func(s *agentState) { s.Running = true })
	go func() {
		defer close(a.done)
		defer store.Close() // releases the store's directory lock for a restart
		err := a.run(ctx)
		a.setState(func(s *agentState) {
			s.Running, s.Ready, s.Leading = false, false, false
			if s.Stopped == "" {
				s.Stopped = "stopped"
				if err != nil && ctx.Err() == nil {
					s.Stopped = "failed: " + err.Error()
				}
			}
		})
	}()
	return nil
}

// Names of an agent's health checks, besides the elector's
// election.DefaultHealthCheckName.
const (
	checkHeartbeat = "nodeHeartbeat"
	checkRecord    = "releaseRecord"
	checkTrial     = "configTrial"
)

// serveHealth makes the agent's /healthz: its elector (a term held past
// its ValidUntil by more than one election TTL: the elector failed to end
// it), its Node's heartbeat (no renewal within the Lease's duration), its
// gate's release record (not valid for longer than a record TTL) and its
// configuration trial (undecided half a trial past its end).
func (a *agent) serveHealth() error {
	o := a.env.opts
	h, err := healthz.New(
		healthz.Check{Name: election.DefaultHealthCheckName, Checker: a.elector.HealthCheck(o.electionTTL).Check},
		healthz.Check{Name: checkHeartbeat, Checker: a.nodes.HeartbeatCheck(0)},
		healthz.Check{Name: checkRecord, Checker: a.gate.RecordCheck(o.recordTTL)},
		healthz.Check{Name: checkTrial, Checker: a.ctrl.TrialCheck(o.trial / 2)},
	)
	if err != nil {
		return err
	}
	a.env.ops.setHealth(a.name, h)
	return nil
}

// run boots the configuration, then runs every part until ctx ends.
func (a *agent) run(ctx context.Context) error {
	st, err := a.ctrl.Bootstrap(ctx)
	if err != nil {
		return fmt.Errorf("boot configuration: %w", err)
	}
	a.onConfigStatus(st)

	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error { return wrap("checkpoint", a.ctrl.Run(ctx)) })
	g.Go(func() error { return wrap("nodestatus", a.nodes.Run(ctx)) })
	g.Go(func() error { return wrap("versiongate", a.runGate(ctx)) })
	g.Go(func() error { a.followGate(ctx); return nil })
	return g.Wait()
}

// wrap names the part that failed.
func wrap(part string, err error) error {
	if err != nil {
		return fmt.Errorf("%s: %w", part, err)
	}
	return nil
}

// nodeControllerConfig registers node, heartbeats it every quarter of
// lease, and reports the provider's status.
func nodeControllerConfig(kube kubernetes.Interface, node *corev1.Node, p nodestatus.NodeProvider, lease time.Duration) nodestatus.Config {
	return nodestatus.Config{
		Client:                 kube,
		Node:                   node,
		Provider:               p,
		LeaseDuration:          lease,
		NodeMonitorGracePeriod: lease,
		PingInterval:           lease / 2,
	}
}

// Taint of the agents' Nodes, as virtual-kubelet taints its nodes with
// virtual-kubelet.io/provider: pods must tolerate it to land there.
const (
	taintKey   = "reconkit.io/nodeagent"
	taintValue = "true"
)

// agentNode is the Node agent-<index> registers: labelled as this
// program's, with an internal address, the given conditions and, when
// taint is set, a NoSchedule taint, so that neither DaemonSets nor the
// scheduler place pods on a Node that runs none.
func agentNode(name string, index int, release versiongate.Release, taint bool, conds ...corev1.NodeCondition) *corev1.Node {
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:   name,
			Labels: map[string]string{nodeLabel: "true", "reconkit.io/release": release.String()},
		},
		Status: corev1.NodeStatus{
			Addresses:  []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: fmt.Sprintf("10.0.0.%d", index)}},
			Conditions: conds,
		},
	}
	if taint {
		n.Spec.Taints = []corev1.Taint{{Key: taintKey, Value: taintValue, Effect: corev1.TaintEffectNoSchedule}}
	}
	return n
}

// runGate publishes the agent's release, campaigns while it is the
// newest, and serves once WaitReady lets it. When the release record is
// lost (its store unreachable or stalled for longer than its TTL), the
// leader may no longer count this node: the agent stops serving and runs
// the gate again, which publishes the record anew.
func (a *agent) runGate(ctx context.Context) error {
	for {
		g, gctx := errgroup.WithContext(ctx)
		g.Go(func() error { return a.gate.Run(gctx) })
		g.Go(func() error {
			if err := a.gate.WaitReady(gctx); err != nil {
				if gctx.Err() != nil {
					return nil // stopped waiting, as asked
				}
				return err
			}
			a.setState(func(s *agentState) { s.Ready = true })
			a.provider.SetCondition(gatedCondition(true, "ReconcilerCompatible", "the reconciler status admits release "+a.version.Release.String()))
			return nil
		})
		err := g.Wait()
		if !errors.Is(err, versiongate.ErrRecordLost) || ctx.Err() != nil {
			return err
		}
		a.log.Error(err, "Release record lost; not serving until the gate admits this node again")
		a.setState(func(s *agentState) { s.Ready = false })
		a.provider.SetCondition(gatedCondition(false, "RecordLost", "the release record expired; publishing it again"))
	}
}

// followGate wakes the view whenever the gate's phase or leadership
// changes, until ctx ends.
func (a *agent) followGate(ctx context.Context) {
	for {
		phase, leading := a.gate.PhaseChanged(), a.gate.LeadingChanged()
		select {
		case <-ctx.Done():
			return
		case <-phase:
		case <-leading:
		}
		a.env.changed()
	}
}

// probe is the configuration trial's health check.
func (a *agent) probe(_ context.Context, c agentConfig) error {
	if c.MaxConnections < a.load() {
		return fmt.Errorf("maxConnections %d is below the %d connections this node serves; it would shed traffic", c.MaxConnections, a.load())
	}
	return nil
}

func (a *agent) onConfigStatus(st checkpoint.Status[agentConfig]) {
	desc := string(st.Phase)
	if st.ID != "" {
		desc += " " + st.ID
	}
	a.setState(func(s *agentState) {
		s.Config, s.CfgPhase, s.CfgID, s.ConfigOK = desc, st.Phase, st.ID, st.Condition
	})
}

// reconcile is the leader's version-gated reconcile: it converges the load
// balancer to the running configuration, the ports of the local release,
// and the live nodes as targets, passing the term's fencing token with
// every write.
func (a *agent) reconcile(ctx context.Context, l election.Leadership) error {
	token := l.Token()
	err := a.reconcileLB(ctx, token)
	result := fmt.Sprintf("ok (token %d)", token)
	if err != nil {
		result = "error: " + err.Error()
	}
	a.setState(func(s *agentState) { s.Reconcile = result })
	return err
}

func (a *agent) reconcileLB(ctx context.Context, token uint64) error {
	a.lbMu.Lock()
	defer a.lbMu.Unlock()
	cfg := a.ctrl.Status().Config
	nodes, err := a.targets.List(ctx, a.env.kube, metav1.ListOptions{LabelSelector: nodeLabel})
	if err != nil {
		return err
	}
	lb, err := cfg.loadBalancer(releasePorts(a.version.Release), nodetargets.From(nodes, corev1.NodeInternalIP))
	if err != nil {
		return err
	}
	ctx, err = a.termContext(ctx, token)
	if err != nil {
		return err
	}
	r, err := a.lbReconciler(lb)
	if err != nil {
		return err
	}
	return r.Reconcile(ctx)
}

// termContext raises the store's fence to the term's token first, so that
// a deposed leader's writes are refused from now on even if this term has
// nothing to change, and returns ctx carrying the token for every write.
func (a *agent) termContext(ctx context.Context, token uint64) (context.Context, error) {
	if err := a.env.lb.raise(token); err != nil {
		return nil, err
	}
	return lbrecon.WithToken(ctx, token), nil
}

// lbReconciler returns the agent's reconciler of its load balancer with lb
// as its description: one, built on the first term and kept across terms,
// as lbrecon asks, so that it remembers the writes no listing has shown
// yet, the failure counts and the provider's pace. The term's token
// travels in each call's context. Called with lbMu held.
func (a *agent) lbReconciler(lb lbrecon.LoadBalancer) (*lbrecon.LoadBalancerReconciler, error) {
	if a.lbr != nil {
		return a.lbr, a.lbr.SetLoadBalancer(lb)
	}
	r, err := lbrecon.NewLoadBalancer(lbrecon.Config{
		Engine: lbrecon.Guard(a.env.lb.engine(), a.checkWrite),
		Tag:    ownerTag,
		// The agents share one in-memory engine that lists what it
		// holds at once; a journal would have to be shared by every
		// agent to outlive a failover, and this engine needs none.
		Journal:         lbrecon.NoJournal,
		Metrics:         a.hooks.LBRecon,
		PollInterval:    50 * time.Millisecond,
		MaxPollInterval: 500 * time.Millisecond,
		PendingTimeout:  30 * time.Second,
		Clock:           a.env.clock,
		Rand:            randOf(a.env.rand, "lbrecon"),
	}, lb)
	if err != nil {
		return nil, err
	}
	a.lbr = r
	return r, nil
}

// checkWrite is the agent's check before each load-balancer write: ctx is
// the term's and ends when the agent no longer holds it. It is a courtesy,
// not the fence: a process can pause after this check and write later, and
// the store refuses that write by its token (see lbStore). The fence
// scenario holds one write right here, after the check passed.
func (a *agent) checkWrite(ctx context.Context, verb lbrecon.Verb, obj lbrecon.Object) error {
	if ctx.Err() != nil {
		return backoff.Permanent(fmt.Errorf("not writing %s %s: the term ended: %w", verb, obj.Name, context.Cause(ctx)))
	}
	if h := a.hold.Swap(nil); h != nil {
		h.stop(a.ctx, verb, obj)
	}
	return nil
}

// writeHold stops one write of an agent between its check and the store,
// as a process paused there (a long GC pause, SIGSTOP, a stalled disk)
// would be, until the scenario releases it.
type writeHold struct {
	held    chan struct{} // closed once a write is held
	release chan struct{} // closed by the scenario
	verb    lbrecon.Verb
	obj     lbrecon.Object
}

func newWriteHold() *writeHold {
	return &writeHold{held: make(chan struct{}), release: make(chan struct{})}
}

// stop records the write, tells the scenario, and waits for the release
// or for the agent to stop; a paused process does not see its term end.
func (h *writeHold) stop(agentCtx context.Context, verb lbrecon.Verb, obj lbrecon.Object) {
	h.verb, h.obj = verb, obj
	close(h.held)
	select {
	case <-h.release:
	case <-agentCtx.Done():
	}
}

func (a *agent) setState(f func(*agentState)) {
	a.mu.Lock()
	f(&a.state)
	ready := a.state.Ready
	a.mu.Unlock()
	if a.env.serving != nil {
		a.env.serving(ready)
	}
	a.env.changed()
}

// snapshot is the agent's state, with the gate's readiness, phase,
// leadership and blocking nodes read now.
func (a *agent) snapshot() agentState {
	a.mu.Lock()
	s, gate := a.state, a.gate
	a.mu.Unlock()
	if s.Running && gate != nil {
		// The gate's Ready turns false the moment the record is lost,
		// before runGate has noticed.
		s.Ready = s.Ready && gate.Ready()
		s.Phase, s.Leading = gate.Phase(), gate.Leading()
		if s.Leading && s.Phase == versiongate.PhaseRestricting {
			for _, n := range gate.Blocking() {
				s.Blocking = append(s.Blocking, n.String())
			}
		}
	}
	return s
}

// stop ends the agent gracefully: it resigns, revokes its records and
// waits for every goroutine.
func (a *agent) stop() {
	a.setState(func(s *agentState) {
		if s.Stopped == "" {
			s.Stopped = "stopped"
		}
	})
	a.cancel()
	a.wait()
}

// kill ends the agent as a crash would, and returns at once: its election
// and gate traffic (to etcd, or to the Kubernetes API) is cut first, so
// its term and release record are never released and expire only after
// their TTLs, and its Node's heartbeat stops. Its goroutines wind down in the background (the releases they
// still try time out); wait waits for them.
func (a *agent) kill() {
	a.setState(func(s *agentState) { s.Stopped, s.Running, s.Ready, s.Leading = "killed", false, false, false })
	a.cut()
	a.cancel()
}

// wait waits until the agent has stopped, then closes its elector, its
// client and its proxies.
func (a *agent) wait() {
	<-a.done
	_ = a.member.close()
}

// cut holds the agent's election and gate traffic, as a partition would;
// restore lets it pass again. Its Node's heartbeat, configuration and
// events go on through the shared Kubernetes client.
func (a *agent) cut() {
	for _, l := range a.member.links {
		l.Cut()
	}
}

func (a *agent) restore() {
	for _, l := range a.member.links {
		l.Restore()
	}
}
