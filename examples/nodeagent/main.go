package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
)

// options are the command-line settings.
type options struct {
	agents     int
	scenario   string
	store      string
	kube       string
	kubeconfig string
	taint      bool
	etcd       string
	etcdPrefix string
	http       string
	namespace  string
	stateDir   string
	verbosity  int
	release    string
	upgradeTo  string
	deadline   time.Duration
	pause      time.Duration

	electionTTL       time.Duration
	recordTTL         time.Duration
	nodeLease         time.Duration
	trial             time.Duration
	reconcileInterval time.Duration
	settle            time.Duration
	lbLatency         time.Duration
	lbPending         time.Duration
	// ownReconciler makes a node wait until a leader of its own release
	// has reconciled (versiongate's MinimumReconcilerRelease set to the
	// node's release): a new release's node then serves only once the
	// rollout reached every node. Without it, any release-1 leader's
	// status admits a node.
	ownReconciler bool
}

var scenarios = []string{"failover", "upgrade", "bad-config", "fence"}

// What the agents elect on and keep the version gate in.
const (
	storeKube = "kube" // a Lease election and the gate's Lease store: no etcd
	storeEtcd = "etcd" // an etcd election and the gate's etcd store
)

// Where the Kubernetes API comes from.
const (
	kubeLocal    = "local"    // a kube-apiserver this run builds and starts
	kubeMemory   = "memory"   // client-go's fake clientset
	kubeExternal = "external" // --kubeconfig
)

// kubeMode says where the Kubernetes API comes from.
func (o options) kubeMode() string {
	if o.kubeconfig != "" {
		return kubeExternal
	}
	return o.kube
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("nodeagent", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.IntVar(&o.agents, "agents", 3, "number of node agents (2 to 9)")
	fs.StringVar(&o.scenario, "scenario", "", "scenario to play, then exit: "+strings.Join(scenarios, ", ")+" (empty: run until Ctrl-C)")
	fs.StringVar(&o.store, "store", storeKube, "what the agents elect on and keep the version gate in: kube (a Lease election and versiongate/kubestore, on the Kubernetes API alone) or etcd (an etcd election and versiongate/etcdstore, on an etcd of its own)")
	fs.StringVar(&o.kube, "kube", kubeLocal, "Kubernetes API when --kubeconfig is empty: local (a real kube-apiserver, built from internal/tools on the first run, then cached) or memory (client-go's fake clientset, which does not behave as a server does)")
	fs.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig of a real cluster to use instead of --kube")
	fs.BoolVar(&o.taint, "taint", true, "register the Nodes with the taint "+taintKey+"="+taintValue+":NoSchedule, as virtual-kubelet does, so that DaemonSets and the scheduler place no pods on them")
	fs.StringVar(&o.etcd, "etcd", "", "with --store etcd: comma-separated endpoints of a real etcd (empty: start a local etcd)")
	fs.StringVar(&o.etcdPrefix, "etcd-prefix", "/reconkit-nodeagent/", "with --store etcd: etcd key prefix; each run uses a fresh sub-prefix and deletes it at exit")
	fs.StringVar(&o.http, "http", "", "address to serve /metrics (Prometheus) and /healthz (every agent's checks: election, Node heartbeat, release record, configuration trial; /healthz/<agent> for one) on, such as 127.0.0.1:9090 (empty: none)")
	fs.StringVar(&o.namespace, "namespace", "default", "namespace of the nodeagent-config ConfigMap and, with --store kube, of the election's and the gate's Leases")
	fs.StringVar(&o.stateDir, "state-dir", "", "directory for the agents' checkpoints, kept at exit (empty: a temporary directory, removed at exit)")
	fs.IntVar(&o.verbosity, "v", 0, "log verbosity on stderr: 0 errors only, 1 info, 2 and up more detail")
	fs.StringVar(&o.release, "release", "1.0.0", "release the agents start with")
	fs.StringVar(&o.upgradeTo, "upgrade-to", "1.1.0", "release the upgrade scenario rolls out; 1.1.0 and later add an https port to the load balancer")
	fs.DurationVar(&o.pause, "pause", time.Second, "pause between the steps of a scenario, to follow the live view")
	fs.DurationVar(&o.deadline, "deadline", 90*time.Second, "a scenario that has not finished by then fails")
	fs.DurationVar(&o.electionTTL, "election-ttl", 2*time.Second, "how long a crashed leader holds on (whole seconds): the election Lease's duration, or the etcd session's TTL")
	fs.DurationVar(&o.recordTTL, "record-ttl", 3*time.Second, "TTL of each agent's release record (whole seconds): its Lease's duration, or its etcd lease's TTL")
	fs.DurationVar(&o.nodeLease, "node-lease", 4*time.Second, "Node heartbeat lease duration (whole seconds); renewed every quarter of it")
	fs.DurationVar(&o.trial, "trial", 3*time.Second, "trial period of an assigned configuration")
	fs.DurationVar(&o.reconcileInterval, "reconcile-interval", 2*time.Second, "period of the leader's load-balancer reconcile")
	fs.DurationVar(&o.settle, "settle", 500*time.Millisecond, "wait of a new leader before its first reconcile")
	fs.DurationVar(&o.lbLatency, "lb-latency", 20*time.Millisecond, "latency of every call to the in-memory load balancer")
	fs.DurationVar(&o.lbPending, "lb-pending", 300*time.Millisecond, "how long a new load-balancer object stays pending")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: nodeagent [flags]\n\n"+
			"Runs a small cluster of node agents on a local kube-apiserver (and, with\n"+
			"--store etcd, a local etcd), and plays a scenario (%s) or runs until Ctrl-C.\n\nFlags:\n", strings.Join(scenarios, ", "))
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if o.agents < 2 || o.agents > 9 {
		return o, fmt.Errorf("--agents %d: want 2 to 9", o.agents)
	}
	if o.scenario != "" && !slices.Contains(scenarios, o.scenario) {
		return o, fmt.Errorf("--scenario %q: want one of %s", o.scenario, strings.Join(scenarios, ", "))
	}
	if o.kube != kubeLocal && o.kube != kubeMemory {
		return o, fmt.Errorf("--kube %q: want %s or %s", o.kube, kubeLocal, kubeMemory)
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if set["kube"] && o.kubeconfig != "" {
		return o, errors.New("--kube and --kubeconfig exclude each other")
	}
	switch o.store {
	case storeKube:
		if set["etcd"] || set["etcd-prefix"] {
			return o, errors.New("--etcd and --etcd-prefix need --store etcd; --store kube uses no etcd")
		}
		if o.kubeMode() == kubeMemory {
			// kubefake's List ignores field selectors, and the Lease
			// elector lists its Lease by name: it would take the gate's
			// Leases for its own and no agent would lead. There is no
			// network to cut either.
			return o, errors.New("--kube memory needs --store etcd: on the in-memory API (kubefake) a List ignores its field selector, so the Lease elector would read the gate's Leases as the election's, and nothing can be cut")
		}
	case storeEtcd:
	default:
		return o, fmt.Errorf("--store %q: want %s or %s", o.store, storeKube, storeEtcd)
	}
	for name, d := range map[string]time.Duration{"election-ttl": o.electionTTL, "record-ttl": o.recordTTL, "node-lease": o.nodeLease} {
		if d < time.Second || d%time.Second != 0 {
			return o, fmt.Errorf("--%s %v: want a whole number of seconds", name, d)
		}
	}
	return o, nil
}

func main() {
	opts, err := parseFlags(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "nodeagent:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err = run(ctx, opts, os.Stdout, os.Stderr)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "nodeagent:", err)
		os.Exit(1)
	}
}

// newLogger logs to w through funcr. Errors are always logged; info
// messages of level l only when l < verbosity.
func newLogger(w io.Writer, verbosity int) logr.Logger {
	sink := funcr.New(func(prefix, args string) {
		if prefix != "" {
			fmt.Fprintln(w, prefix, args)
		} else {
			fmt.Fprintln(w, args)
		}
	}, funcr.Options{LogTimestamp: true, TimestampFormat: "15:04:05.000", Verbosity: verbosity}).GetSink()
	return logr.New(quietSink{LogSink: sink, verbosity: verbosity})
}

// quietSink shifts verbosity by one, so that the default (0) shows errors
// only.
type quietSink struct {
	logr.LogSink
	verbosity int
}

func (s quietSink) Enabled(level int) bool { return level < s.verbosity && s.LogSink.Enabled(level) }

func (s quietSink) WithValues(kv ...any) logr.LogSink {
	return quietSink{LogSink: s.LogSink.WithValues(kv...), verbosity: s.verbosity}
}

func (s quietSink) WithName(name string) logr.LogSink {
	return quietSink{LogSink: s.LogSink.WithName(name), verbosity: s.verbosity}
}
