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
	clientv3 "go.etcd.io/etcd/client/v3"
	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/reconkit/reconkit/backoff"
	"github.com/reconkit/reconkit/checkpoint"
	"github.com/reconkit/reconkit/checkpoint/configmapsource"
	"github.com/reconkit/reconkit/election"
	"github.com/reconkit/reconkit/lbrecon"
	"github.com/reconkit/reconkit/nodestatus"
	"github.com/reconkit/reconkit/versiongate"
)

// Keys of the version gate, under the run's etcd prefix.
const (
	gateStatusKey   = "gate/status"
	gateNodesPrefix = "gate/nodes/"
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
	ConfigOK  corev1.NodeCondition
	Reconcile string // last reconcile result, on the leader
}

// agent is one node agent: checkpoint, nodestatus, versiongate and the
// election, wired together.
type agent struct {
	name    string
	index   int
	version versiongate.Version
	env     *env
	log     logr.Logger

	cli      *clientv3.Client
	links    []link // the client's way to etcd, cut by kill and by the fence scenario
	elector  *elector
	ctrl     *checkpoint.Controller[agentConfig]
	provider *agentProvider

	ctx    context.Context // ends when the agent stops or is killed
	cancel context.CancelFunc
	done   chan struct{}
	hold   atomic.Pointer[writeHold] // armed by the fence scenario

	mu    sync.Mutex
	gate  *versiongate.Gate // the current gate; a new one after a lost record
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
	cli, links, err := a.env.newAgentClient()
	if err != nil {
		return err
	}
	a.cli, a.links = cli, links
	defer func() {
		if err != nil {
			if a.elector != nil {
				a.elector.close()
			}
			cli.Close()
			closeLinks(links)
		}
	}()
	a.elector, err = newElector(cli, a.name, o.electionTTL)
	if err != nil {
		return err
	}

	store, err := checkpoint.NewFS(checkpoint.FSConfig{Dir: filepath.Join(a.env.stateDir, a.name)})
	if err != nil {
		return err
	}
	source, err := configmapsource.New(configmapsource.Config{Client: a.env.kube, Namespace: o.namespace, Name: configMapName, Key: configMapKey})
	if err != nil {
		return err
	}
	a.ctrl, err = checkpoint.New(checkpoint.Config[agentConfig]{
		Store:         store,
		Parse:         parseConfig,
		Validate:      validateConfig,
		Local:         localConfig(),
		TrialDuration: o.trial,
		CheckInterval: o.trial / 6,
		Probe:         a.probe,
		OnStatus:      a.onConfigStatus,
		Source:        source,
	})
	if err != nil {
		return err
	}

	if _, err := a.newGate(); err != nil { // checks the configuration early
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

// run boots the configuration, then runs every part until ctx ends.
func (a *agent) run(ctx context.Context) error {
	st, err := a.ctrl.Bootstrap(ctx)
	if err != nil {
		return fmt.Errorf("boot configuration: %w", err)
	}
	a.onConfigStatus(st)

	node := agentNode(a.name, a.index, a.version.Release, a.env.taint, nodeCondition(st.Condition),
		gatedCondition(false, "WaitingForReconciler", "waiting for a reconciler status that admits release "+a.version.Release.String()))
	a.provider = newAgentProvider(node)
	o := a.env.opts
	nodes, err := newNodeController(a.env.kube, node, a.provider, o.nodeLease)
	if err != nil {
		return err
	}

	g, ctx := errgroup.WithContext(ctx)
	goPart(ctx, g, "checkpoint", a.ctrl.Run)
	goPart(ctx, g, "nodestatus", nodes.Run)
	goPart(ctx, g, "versiongate", a.runGate)
	return g.Wait()
}

// newNodeController registers node and heartbeats it every quarter of
// lease, with the provider's conditions.
func newNodeController(kube kubernetes.Interface, node *corev1.Node, p *agentProvider, lease time.Duration) (*nodestatus.NodeController, error) {
	return nodestatus.New(nodestatus.Config{
		Client:                 kube,
		Node:                   node,
		Provider:               p,
		LeaseDuration:          lease,
		NodeMonitorGracePeriod: lease,
		PingInterval:           lease / 2,
	})
}

// goPart runs one part of the agent in g. A part that returns once ctx has
// ended stopped as asked, whatever it returns (nil, or ctx.Err() from a
// package that still reports it); an error before that ends the group.
func goPart(ctx context.Context, g *errgroup.Group, name string, fn func(context.Context) error) {
	g.Go(func() error {
		if err := fn(ctx); err != nil && ctx.Err() == nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		return nil
	})
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

// newGate returns a new version gate for the agent and makes it current.
func (a *agent) newGate() (*versiongate.Gate, error) {
	o := a.env.opts
	gate, err := versiongate.New(versiongate.Config{
		Client:                   a.cli,
		NodeID:                   a.name,
		Version:                  a.version,
		MinimumReconcilerRelease: versiongate.Release{Major: 1},
		MinimumCompatibleRelease: minimumCompatible(a.version.Release),
		StatusKey:                gateStatusKey,
		NodesPrefix:              gateNodesPrefix,
		RecordTTL:                o.recordTTL,
		Candidate:                a.elector,
		Reconcile:                a.reconcile,
		SettleTime:               o.settle,
		ReconcileInterval:        o.reconcileInterval,
	})
	if err != nil {
		return nil, err
	}
	a.mu.Lock()
	a.gate = gate
	a.mu.Unlock()
	return gate, nil
}

func (a *agent) currentGate() *versiongate.Gate {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.gate
}

// runGate publishes the agent's release, campaigns while it is the
// newest, and serves once WaitReady lets it. When the release record's
// lease is lost (etcd unreachable or stalled for longer than its TTL), the
// leader may no longer count this node: the agent stops serving and starts
// over with a new gate, as versiongate asks of its host.
func (a *agent) runGate(ctx context.Context) error {
	gate := a.currentGate()
	for {
		g, gctx := errgroup.WithContext(ctx)
		goPart(gctx, g, "run", gate.Run)
		goPart(gctx, g, "wait ready", func(ctx context.Context) error {
			if err := gate.WaitReady(ctx); err != nil {
				return err
			}
			a.setState(func(s *agentState) { s.Ready = true })
			a.provider.setCondition(gatedCondition(true, "ReconcilerCompatible", "the reconciler status admits release "+a.version.Release.String()))
			return nil
		})
		goPart(gctx, g, "leading", func(ctx context.Context) error {
			for {
				select {
				case <-ctx.Done():
					return nil
				case <-gate.LeadingChanged():
					a.env.changed()
				}
			}
		})
		err := g.Wait()
		if !errors.Is(err, versiongate.ErrRecordLost) || ctx.Err() != nil {
			return err
		}
		a.log.Error(err, "Release record lost; not serving until the gate admits this node again")
		a.setState(func(s *agentState) { s.Ready = false })
		a.provider.setCondition(gatedCondition(false, "RecordLost", "the release record expired; publishing it again"))
		if gate, err = a.newGate(); err != nil {
			return err
		}
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
		s.Config, s.CfgPhase, s.CfgID, s.ConfigOK = desc, st.Phase, st.ID, nodeCondition(st.Condition)
	})
	if a.provider != nil {
		a.provider.setCondition(nodeCondition(st.Condition))
	}
}

// nodeCondition is the ConfigOK condition as a Node condition.
func nodeCondition(c checkpoint.Condition) corev1.NodeCondition {
	return corev1.NodeCondition{
		Type:               corev1.NodeConditionType(c.Type),
		Status:             corev1.ConditionStatus(c.Status),
		Reason:             c.Reason,
		Message:            c.Message,
		LastTransitionTime: metav1.NewTime(c.LastTransitionTime),
	}
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
	cfg := a.ctrl.Status().Config
	targets, err := liveTargets(ctx, a.env.kube, time.Now())
	if err != nil {
		return err
	}
	lb, err := cfg.loadBalancer(releasePorts(a.version.Release), targets)
	if err != nil {
		return err
	}
	eng, err := a.termEngine(token)
	if err != nil {
		return err
	}
	r, err := lbrecon.NewLoadBalancer(lbrecon.Config{
		Engine:          eng,
		Tag:             ownerTag,
		PollInterval:    50 * time.Millisecond,
		MaxPollInterval: 500 * time.Millisecond,
		PendingTimeout:  30 * time.Second,
	}, lb)
	if err != nil {
		return err
	}
	return r.Reconcile(ctx)
}

// termEngine is the load balancer as the term with token writes to it:
// the store, whose fence the term raises first so that a deposed leader's
// writes are refused from now on even if this term has nothing to change,
// behind lbrecon.Guard with the agent's check.
func (a *agent) termEngine(token uint64) (lbrecon.Engine, error) {
	if err := a.env.lb.raise(token); err != nil {
		return nil, err
	}
	return lbrecon.Guard(a.env.lb.as(token), a.checkWrite), nil
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
	a.mu.Unlock()
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

// kill ends the agent as a crash would, and returns at once: its traffic
// to etcd is cut first, so its election session and release record are
// never revoked and expire only after their TTLs, and its Node's heartbeat
// stops. Its goroutines wind down in the background (the releases they
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
	a.elector.close()
	_ = a.cli.Close()
	closeLinks(a.links)
}

// cut holds the agent's traffic to etcd, as a partition would; restore
// lets it pass again.
func (a *agent) cut() {
	for _, l := range a.links {
		l.Cut()
	}
}

func (a *agent) restore() {
	for _, l := range a.links {
		l.Restore()
	}
}
