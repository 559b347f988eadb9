package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/reconkit/reconkit/checkpoint"
	"github.com/reconkit/reconkit/checkpoint/configmapsource"
	"github.com/reconkit/reconkit/internal/servers"
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
	proxies  []*servers.Proxy // the client's way to etcd, cut by kill
	elector  *elector
	ctrl     *checkpoint.Controller[agentConfig]
	provider *agentProvider

	cancel context.CancelFunc
	done   chan struct{}

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
	cli, proxies, err := a.env.newAgentClient()
	if err != nil {
		return err
	}
	a.cli, a.proxies = cli, proxies
	defer func() {
		if err != nil {
			if a.elector != nil {
				a.elector.close()
			}
			cli.Close()
			closeProxies(proxies)
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

	ctx, a.cancel = context.WithCancel(logr.NewContext(ctx, a.log))
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

	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:   a.name,
			Labels: map[string]string{nodeLabel: "true", "reconkit.io/release": a.version.Release.String()},
		},
		Status: corev1.NodeStatus{
			Addresses:  []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: fmt.Sprintf("10.0.0.%d", a.index)}},
			Conditions: []corev1.NodeCondition{st.Condition, gatedCondition(false, "WaitingForReconciler", "waiting for a reconciler status that admits release "+a.version.Release.String())},
		},
	}
	a.provider = newAgentProvider(node)
	o := a.env.opts
	nodes, err := nodestatus.New(nodestatus.Config{
		Client:                 a.env.kube,
		Node:                   node,
		Provider:               a.provider,
		LeaseDuration:          o.nodeLease,
		NodeMonitorGracePeriod: o.nodeLease,
		PingInterval:           o.nodeLease / 2,
	})
	if err != nil {
		return err
	}

	g := newGroup(ctx)
	g.start("checkpoint", a.ctrl.Run)
	g.start("nodestatus", nodes.Run)
	g.start("versiongate", a.runGate)
	g.start("phase", a.watchPhase)
	return g.wait()
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
		Candidate:                a.elector.candidate(),
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
		g := newGroup(ctx)
		g.start("run", gate.Run)
		g.start("wait ready", func(ctx context.Context) error {
			if err := gate.WaitReady(ctx); err != nil {
				return err
			}
			a.setState(func(s *agentState) { s.Ready = true })
			a.provider.setCondition(gatedCondition(true, "ReconcilerCompatible", "the reconciler status admits release "+a.version.Release.String()))
			return nil
		})
		err := g.wait()
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

// watchPhase copies the gate's phase into the agent state for the view.
func (a *agent) watchPhase(ctx context.Context) error {
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		gate := a.currentGate()
		phase, leading := gate.Phase(), gate.Leading()
		var blocking []string
		if leading && phase == versiongate.PhaseRestricting {
			for _, n := range gate.Blocking() {
				blocking = append(blocking, n.String())
			}
		}
		a.mu.Lock()
		changed := a.state.Phase != phase || a.state.Leading != leading || !slices.Equal(a.state.Blocking, blocking)
		a.state.Phase, a.state.Leading, a.state.Blocking = phase, leading, blocking
		a.mu.Unlock()
		if changed {
			a.env.changed()
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
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
	a.setState(func(s *agentState) { s.Config, s.CfgPhase, s.CfgID, s.ConfigOK = desc, st.Phase, st.ID, st.Condition })
	if a.provider != nil {
		a.provider.setCondition(st.Condition)
	}
}

// reconcile is the leader's version-gated reconcile: it converges the load
// balancer to the running configuration, the ports of the local release,
// and the live nodes as targets, passing the term's fencing token with
// every write.
func (a *agent) reconcile(ctx context.Context, token uint64) error {
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
	r, err := lbrecon.NewLoadBalancer(lbrecon.Config{
		Engine:          &fencedEngine{Engine: a.env.lb, fence: &a.env.fence, token: token},
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

func (a *agent) setState(f func(*agentState)) {
	a.mu.Lock()
	f(&a.state)
	a.mu.Unlock()
	a.env.changed()
}

func (a *agent) snapshot() agentState {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.state
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
	for _, p := range a.proxies {
		p.Cut()
	}
	a.cancel()
}

// wait waits until the agent has stopped, then closes its elector, its
// client and its proxies.
func (a *agent) wait() {
	<-a.done
	a.elector.close()
	_ = a.cli.Close()
	closeProxies(a.proxies)
}

// group runs functions until the first fails or ctx ends, and waits for
// all of them.
type group struct {
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	err    error
}

func newGroup(ctx context.Context) *group {
	ctx, cancel := context.WithCancel(ctx)
	return &group{ctx: ctx, cancel: cancel}
}

func (g *group) start(name string, fn func(context.Context) error) {
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		err := fn(g.ctx)
		if err != nil && g.ctx.Err() == nil {
			g.mu.Lock()
			if g.err == nil {
				g.err = fmt.Errorf("%s: %w", name, err)
			}
			g.mu.Unlock()
			g.cancel()
		}
	}()
}

func (g *group) wait() error {
	g.wg.Wait()
	g.cancel()
	return g.err
}
