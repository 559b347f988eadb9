// Command outsider is a node agent on the Kubernetes API alone, built on
// reconkit from outside its module, the way a new user builds one. Each
// agent registers and heartbeats its Node (with the ConfigOK and
// ReleaseReady conditions), keeps a last-known-good Settings from a
// ConfigMap, and campaigns on a Lease through a version gate kept in Leases;
// the leader converges the load balancer over the healthy Nodes. Each agent
// serves /metrics and an aggregated /healthz.
package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"log"
	"net/http"
	"net/netip"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/clock"

	"github.com/reconkit/reconkit/checkpoint"
	"github.com/reconkit/reconkit/checkpoint/configmapsource"
	"github.com/reconkit/reconkit/election/lease"
	"github.com/reconkit/reconkit/healthz"
	"github.com/reconkit/reconkit/lbrecon"
	"github.com/reconkit/reconkit/lbrecon/lbrecontest"
	"github.com/reconkit/reconkit/lbrecon/nodetargets"
	"github.com/reconkit/reconkit/nodestatus"
	"github.com/reconkit/reconkit/prommetrics"
	"github.com/reconkit/reconkit/versiongate"
	"github.com/reconkit/reconkit/versiongate/kubestore"
)

// Release is this build's release, which the version gate compares.
var Release = versiongate.Version{Release: versiongate.Release{Major: 1}}

// Settings is what the ConfigMap "outsider" assigns, as JSON in its key
// settings.json: the load balancer's ID, ports and external addresses. Its
// targets are the healthy Nodes labelled NodeLabel.
type Settings struct {
	ID        string // "outsider" when empty; a new ID is built, then the old one torn down
	Ports     []lbrecon.Port
	Addresses []netip.Addr
}

// LoadBalancer is the load balancer s describes over targets; its objects
// carry the tag "owner=outsider".
func (s Settings) LoadBalancer(targets []lbrecon.Target) lbrecon.LoadBalancer {
	return lbrecon.LoadBalancer{ID: cmp.Or(s.ID, "outsider"), Suffix: "outsider", Ports: s.Ports, Addresses: s.Addresses,
		Targets: targets}
}

// NodeLabel marks the agents' Nodes.
const NodeLabel = "example.com/outsider"

// Deps is what an agent runs on: a cluster in main, kubefake in the test.
type Deps struct {
	Kube                kubernetes.Interface
	Node, IP, Namespace string // Namespace holds the ConfigMap and the Leases of the election and the gate
	Store               checkpoint.LKGStore
	Engine              lbrecon.Engine // the load-balancer provider
	Mux                 *http.ServeMux // gets /metrics and /healthz
	// Clock times every wait, deadline and timestamp of the agent's parts;
	// nil means the real clock. It must run within 2% of the apiserver's.
	Clock clock.WithTicker
	// Rand gives each part its random source by name (a test's seeded
	// one); main's gives none, which means math/rand/v2's global source.
	Rand func(part string) func() float64
}

// Run runs one node's agent until ctx ends; it returns nil then. The
// constructors' errors, all about their configuration, are reported together.
func Run(ctx context.Context, d Deps) error {
	reg := prometheus.NewRegistry()
	hooks, err1 := prommetrics.Agent(reg, d.Node, nil)
	source, err2 := configmapsource.New(configmapsource.Config{Client: d.Kube, Namespace: d.Namespace,
		Name: "outsider", Key: "settings.json", Clock: d.Clock, Rand: d.Rand("configmapsource")})
	elector, err3 := lease.New(lease.Config{Client: d.Kube, Namespace: d.Namespace, Name: "outsider-leader",
		Identity: d.Node, Metrics: hooks.Election, Clock: d.Clock, Rand: d.Rand("lease")})
	store, err4 := kubestore.New(kubestore.Config{Client: d.Kube, Namespace: d.Namespace, Gate: "outsider", Clock: d.Clock, Rand: d.Rand("kubestore")})
	// No journal: the replicas share no storage. A provider whose listing lags
	// wants one they share (lbrecon.FileJournal on shared storage).
	lb, err5 := lbrecon.NewMoving(lbrecon.Config{Engine: d.Engine, Tag: "owner=outsider", Journal: lbrecon.NoJournal, Metrics: hooks.LBRecon, Clock: d.Clock, Rand: d.Rand("lbrecon")},
		Settings{}.LoadBalancer(nil)) // kept across reconciles and terms
	if err := errors.Join(err1, err2, err3, err4, err5); err != nil {
		return err
	}
	defer elector.Close()
	provider := nodestatus.NewProvider(nodestatus.ProviderConfig{})
	provider.SetAddresses(corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: d.IP})
	configs, err1 := checkpoint.New(checkpoint.Config[Settings]{
		Store: d.Store, Source: source, Conditions: provider, Metrics: hooks.Checkpoint, Clock: d.Clock, Rand: d.Rand("checkpoint"),
		Parse:    func(b []byte) (s Settings, err error) { return s, json.Unmarshal(b, &s) },
		Validate: func(s Settings) error { return s.LoadBalancer(nil).Validate() }})
	nodes, err2 := nodestatus.New(nodestatus.Config{Client: d.Kube, Provider: provider, Metrics: hooks.Nodestatus, Clock: d.Clock, Rand: d.Rand("nodestatus"),
		Node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: d.Node, Labels: map[string]string{NodeLabel: "true"}}}})
	health := nodestatus.NewNodeHealth(nodestatus.HealthRule{Conditions: []corev1.NodeConditionType{corev1.NodeReady, checkpoint.ConditionConfigOK, versiongate.ConditionReleaseReady}})
	// The leader's work, called by the gate at each term's start, then every 30s.
	reconcile := func(ctx context.Context, term versiongate.Term) error {
		if configs.Status().ID == "" { // the zero local Settings describe no load balancer: hand the term to an agent with settings
			return errors.Join(errors.New("no assigned or last-known-good settings: resigning, the load balancer left as it is"), term.Resign(ctx))
		}
		healthy, err := health.List(ctx, d.Kube, metav1.ListOptions{LabelSelector: NodeLabel})
		if err != nil {
			return err
		}
		if err := lb.SetLoadBalancer(configs.Status().Config.LoadBalancer(nodetargets.From(healthy))); err != nil {
			return err
		}
		return lb.Reconcile(lbrecon.WithToken(ctx, term.Token())) // every provider write carries the term's token
	}
	gate, err3 := versiongate.New(versiongate.Config{Store: store, NodeID: d.Node, Version: Release,
		MinimumCompatibleRelease: Release.Release, Candidate: elector, Reconcile: reconcile,
		Conditions: provider, Metrics: hooks.Versiongate, RejoinAfterRecordLoss: true, Clock: d.Clock, RecordClock: d.Clock, Rand: d.Rand("versiongate")})
	if err := errors.Join(err1, err2, err3); err != nil {
		return err
	}
	leadership := elector.HealthCheck(20 * time.Second)
	checks, err := healthz.New(healthz.Check{Name: leadership.Name(), Checker: leadership.Check},
		healthz.Check{Name: nodestatus.HeartbeatCheckName, Checker: nodes.HeartbeatCheck(0)},
		healthz.Check{Name: versiongate.RecordCheckName, Checker: gate.RecordCheck(time.Minute)},
		healthz.Check{Name: checkpoint.TrialCheckName, Checker: configs.TrialCheck(time.Minute)})
	if err != nil {
		return err
	}
	d.Mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	d.Mux.Handle("GET /healthz", checks)
	if _, err := configs.Bootstrap(ctx); err != nil {
		return err
	}
	g, ctx := errgroup.WithContext(ctx)
	g.Go(func() error { return configs.Run(ctx) })
	g.Go(func() error { return nodes.Run(ctx) })
	g.Go(func() error { return gate.Run(ctx) })
	return g.Wait()
}

func main() {
	host, _ := os.Hostname()
	d := Deps{Mux: http.NewServeMux(), Engine: lbrecontest.New(lbrecontest.Config{}), Rand: func(string) func() float64 { return nil }} // no provider: in memory, no seeded sources
	flag.StringVar(&d.Node, "node", host, "this node's name")
	flag.StringVar(&d.IP, "node-ip", "", "this node's InternalIP, its address in the load balancer")
	flag.StringVar(&d.Namespace, "namespace", "kube-system", "namespace of the ConfigMap and of the Leases")
	kubeconfig := flag.String("kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig; empty means in-cluster")
	stateDir := flag.String("state-dir", "/var/lib/outsider", "checkpoint directory")
	listen := flag.String("listen", ":8080", "address serving /metrics and /healthz")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, d, *kubeconfig, *stateDir, *listen); err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Fatal("outsider: ", err)
	}
}

// run serves d.Mux on listen until Run, on a cluster's client and a
// checkpoint directory, has returned.
func run(ctx context.Context, d Deps, kubeconfig, stateDir, listen string) error {
	restConfig, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	if d.Kube, err = kubernetes.NewForConfig(restConfig); err != nil {
		return err
	}
	store, err := checkpoint.NewFS(checkpoint.FSConfig{Dir: stateDir})
	if err != nil {
		return err
	}
	defer store.Close()
	d.Store = store
	srv := &http.Server{Addr: listen, Handler: d.Mux}
	g, ctx := errgroup.WithContext(ctx)
	g.Go(srv.ListenAndServe) // http.ErrServerClosed once Run returned
	g.Go(func() error { defer srv.Close(); return Run(ctx, d) })
	return g.Wait()
}
