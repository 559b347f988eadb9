package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/clock"

	"github.com/reconkit/reconkit/checkpoint"
	"github.com/reconkit/reconkit/kubefake"
	"github.com/reconkit/reconkit/lbrecon/lbrecontest"
	"github.com/reconkit/reconkit/versiongate"
)

// env is what the agents share: the coordination (election and gate
// store), the Kubernetes API, the load balancer, the state directory, and
// the list of agents for the view.
type env struct {
	opts options
	log  logr.Logger
	say  func(format string, args ...any) // narrative lines on stdout

	local *localServers // what this run started: an apiserver with --kube local, an etcd with --store etcd unless --etcd
	coord coordination  // what the agents elect on and keep the gate in

	kube     kubernetes.Interface
	kubeMode string // kubeLocal, kubeMemory or kubeExternal
	taint    bool   // register Nodes with the NoSchedule taint
	assigner *configAssigner
	events   *eventBroadcaster // every agent's events, on its Node
	ops      *ops              // metrics and health checks, served with --http

	stateDir  string
	ownsState bool
	fs        checkpoint.FS // the checkpoints' file system; nil means the OS's
	// Hooks of the fleet simulator, nil otherwise: serving hears whether
	// the agent serves (passed WaitReady), wrapStore wraps its
	// checkpoint store, ping is the Node's backend health, and a Node
	// stops its heartbeats while its ping fails.
	serving   func(bool)
	wrapStore func(checkpoint.LKGStore) checkpoint.LKGStore
	ping      func(context.Context) error
	// clock times the agents' waits, deadlines and timestamps (nodestatus,
	// checkpoint, configmapsource, versiongate, lbrecon); nil means the
	// real clock. The fleet simulator gives each agent its own, drifting
	// within 2% of the apiserver's (the election and the gate store get it
	// through kubeCoordination.clock).
	clock clock.WithTicker
	// rand gives the agents' parts their random sources by name (see
	// randOf); nil means math/rand/v2's global source. The fleet simulator
	// gives each agent seeded ones (fleetsim.Deps.Rand).
	rand func(part string) func() float64

	lb *lbStore // the in-memory load balancer behind its fence

	changes chan struct{} // capacity 1: something the view shows changed

	mu     sync.Mutex
	agents []*agent // by index-1: the current agent of each slot
}

// newEnv sets up the Kubernetes API, the coordination (etcd only with
// --store etcd), the state directory and the load balancer. On error
// everything made so far is undone.
func newEnv(ctx context.Context, opts options, log logr.Logger, say func(string, ...any)) (e *env, err error) {
	e = &env{opts: opts, log: log, say: say, ops: newOps(), changes: make(chan struct{}, 1), agents: make([]*agent, opts.agents)}
	// A return sets the named result to nil before this runs: close
	// what was started through a copy.
	started := e
	defer func() {
		if err != nil {
			started.close()
		}
	}()

	if opts.stateDir == "" {
		dir, err := os.MkdirTemp("", "nodeagent-state-")
		if err != nil {
			return e, err
		}
		e.stateDir, e.ownsState = dir, true
	} else {
		if err := os.MkdirAll(opts.stateDir, 0o700); err != nil {
			return e, err
		}
		e.stateDir = opts.stateDir
	}
	say("setup: checkpoints in %s", e.stateDir)

	e.kubeMode = opts.kubeMode()
	if e.kubeMode == kubeLocal {
		say("setup: Kubernetes API: a local kube-apiserver (its first build takes minutes, then it is cached; --kube memory --store etcd runs on an in-memory API instead)")
	}
	withEtcd := opts.store == storeEtcd && opts.etcd == ""
	e.local, err = startLocal(ctx, withEtcd, e.kubeMode == kubeLocal, say)
	if err != nil {
		return e, err
	}

	var kubeCfg *rest.Config // of a real apiserver; nil on the in-memory API
	var kubeDesc string
	switch e.kubeMode {
	case kubeMemory:
		e.kube = kubefake.NewClientset()
		kubeDesc = "the in-memory Kubernetes API"
		say("setup: Kubernetes API is IN-MEMORY (reconkit's kubefake: client-go's fake clientset with resourceVersions and their preconditions, but no admission and no validation); --kube local runs a real one")
	case kubeLocal:
		kubeCfg = e.local.kubeConfig()
		e.kube, err = kubernetes.NewForConfig(kubeCfg)
		if err != nil {
			return e, fmt.Errorf("kubernetes client: %w", err)
		}
		kubeDesc = "the local kube-apiserver"
		say("setup: local kube-apiserver at %s (state dir %s)", kubeCfg.Host, e.local.kubeDir())
	default:
		kubeCfg, err = clientcmd.BuildConfigFromFlags("", opts.kubeconfig)
		if err != nil {
			return e, fmt.Errorf("kubeconfig: %w", err)
		}
		// Every agent and the view share this client: client-go's default
		// 5 requests per second would delay heartbeats past their timeout.
		kubeCfg.QPS, kubeCfg.Burst = 100, 200
		e.kube, err = kubernetes.NewForConfig(kubeCfg)
		if err != nil {
			return e, fmt.Errorf("kubernetes client: %w", err)
		}
		kubeDesc = "Kubernetes at " + kubeCfg.Host
		what := fmt.Sprintf("Nodes agent-1..%d and ConfigMap %s/%s", opts.agents, opts.namespace, configMapName)
		if opts.store == storeKube {
			what += fmt.Sprintf(", and Leases %s and %s-* in %s,", electionLease, gateName, opts.namespace)
		}
		say("setup: Kubernetes API at %s (%s are created, and deleted at exit)", kubeCfg.Host, what)
		if err := e.deleteKubeObjects(ctx); err != nil {
			return e, err
		}
	}

	switch opts.store {
	case storeEtcd:
		endpoints := strings.Split(opts.etcd, ",")
		if withEtcd {
			endpoints = e.local.etcdEndpoints()
			say("setup: local etcd at %s (data dir %s)", strings.Join(endpoints, ","), e.local.etcdDataDir())
		} else {
			say("setup: etcd at %s", opts.etcd)
		}
		if e.coord, err = newEtcdCoordination(opts, endpoints); err != nil {
			return e, err
		}
		say("setup: the agents elect on etcd (election/etcd) and keep the version gate in etcd (versiongate/etcdstore); each term's etcd guard fences the gate's status writes")
	default: // parseFlags refused the in-memory API: kubeCfg is set
		if e.coord, err = newKubeCoordination(opts, e.kube, kubeCfg, kubeDesc); err != nil {
			return e, err
		}
		say("setup: no etcd for the agents: they elect on the Lease %s/%s (election/lease) and keep the version gate in Leases %s-* (versiongate/kubestore); the Lease term's token fences the gate's status writes (--store etcd uses etcd instead)", opts.namespace, electionLease, gateName)
	}

	e.taint = opts.taint
	if e.taint {
		say("setup: Nodes carry the taint %s=%s:NoSchedule, so DaemonSets and the scheduler place no pods on them (--taint=false leaves it off)", taintKey, taintValue)
	}
	e.assigner = &configAssigner{client: e.kube, namespace: opts.namespace}
	e.events = newEventBroadcaster(e.kube)
	say("setup: each agent records events on its Node")
	e.lb = newLBStore(lbrecontest.New(lbrecontest.Config{Latency: opts.lbLatency, Pending: opts.lbPending}))
	say("setup: load balancer is the in-memory engine of lbrecon/lbrecontest (latency %v, pending %v) behind a store that refuses writes with a stale fencing token", opts.lbLatency, opts.lbPending)
	return e, nil
}

func closeLinks(ls []link) {
	for _, l := range ls {
		_ = l.Close()
	}
}

// observeStore is store as the agents' checkpoints use it.
func (e *env) observeStore(store checkpoint.LKGStore) checkpoint.LKGStore {
	if e.wrapStore == nil {
		return store
	}
	return e.wrapStore(store)
}

// changed tells the view to look again. It never blocks.
func (e *env) changed() {
	select {
	case e.changes <- struct{}{}:
	default:
	}
}

// startAgent starts agent-<index> at version, replacing the slot's agent,
// which must have been stopped.
func (e *env) startAgent(ctx context.Context, index int, version versiongate.Version) (*agent, error) {
	a := newAgent(e, index, version)
	if err := a.start(ctx); err != nil {
		return nil, fmt.Errorf("start %s: %w", a.name, err)
	}
	e.mu.Lock()
	e.agents[index-1] = a
	e.mu.Unlock()
	e.changed()
	return a, nil
}

func (e *env) agentList() []*agent {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []*agent
	for _, a := range e.agents {
		if a != nil {
			out = append(out, a)
		}
	}
	return out
}

func (e *env) agentByName(name string) *agent {
	for _, a := range e.agentList() {
		if a.name == name {
			return a
		}
	}
	return nil
}

// stopAgents stops every running agent gracefully and waits for them.
func (e *env) stopAgents() {
	var wg sync.WaitGroup
	for _, a := range e.agentList() {
		wg.Go(a.stop)
	}
	wg.Wait()
}

// close stops the agents and removes everything this run made: the etcd
// keys (or the local etcd), the Kubernetes objects on a real cluster, and
// the temporary state directory. It reports what it did.
func (e *env) close() {
	e.stopAgents()
	if e.events != nil {
		e.events.shutdown()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var errs []error
	if e.coord != nil {
		errs = append(errs, e.coord.close(ctx))
	}
	if e.kube != nil && e.kubeMode == kubeExternal {
		errs = append(errs, e.deleteKubeObjects(ctx))
	}
	if e.local != nil {
		errs = append(errs, e.local.close())
		e.say("cleanup: local servers stopped, their data dirs removed")
	}
	if e.ownsState && e.stateDir != "" {
		errs = append(errs, os.RemoveAll(e.stateDir))
		e.say("cleanup: state dir %s removed", e.stateDir)
	}
	if err := errors.Join(errs...); err != nil {
		e.say("cleanup: %v", err)
	}
}

// deleteKubeObjects removes this program's Nodes, their Leases and the
// ConfigMap from a real cluster, and with --store kube the election's and
// the gate's Leases.
func (e *env) deleteKubeObjects(ctx context.Context) error {
	var errs []error
	ignore := func(err error) {
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, err)
		}
	}
	for i := 1; i <= e.opts.agents; i++ {
		name := fmt.Sprintf("agent-%d", i)
		n, err := e.kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			ignore(err)
			continue
		}
		if n.Labels[nodeLabel] != "true" {
			errs = append(errs, fmt.Errorf("node %s exists and is not one of this program's; not touching it", name))
			continue
		}
		ignore(e.kube.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{}))
		ignore(e.kube.CoordinationV1().Leases(corev1.NamespaceNodeLease).Delete(ctx, name, metav1.DeleteOptions{}))
	}
	ignore(e.kube.CoreV1().ConfigMaps(e.opts.namespace).Delete(ctx, configMapName, metav1.DeleteOptions{}))
	if e.opts.store == storeKube {
		errs = append(errs, deleteGateLeases(ctx, e.kube, e.opts.namespace))
	}
	return errors.Join(errs...)
}

// randOf returns rand's source for part, or nil (math/rand/v2's global
// source) when rand is nil.
func randOf(rand func(part string) func() float64, part string) func() float64 {
	if rand == nil {
		return nil
	}
	return rand(part)
}
