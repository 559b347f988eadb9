// Command outsider is a node agent on the Kubernetes API alone, built on
// reconkit from outside its module, the way a new user builds one. Each
// agent registers and heartbeats its Node (with the ConfigOK and
// ReleaseReady conditions), keeps a last-known-good load-balancer
// description from a ConfigMap, and campaigns on a Lease through a version
// gate kept in Leases; the leader converges the load balancer over the
// healthy Nodes. Each agent serves /metrics and an aggregated /healthz.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/http"
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

	"github.com/reconkit/reconkit/checkpoint"
	"github.com/reconkit/reconkit/checkpoint/configmapsource"
	"github.com/reconkit/reconkit/election"
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

// The agents' shared names: the ConfigMap (its key settings.json holds the
// load balancer as JSON, targets aside; no ID means none), the label on
// their Nodes, which picks the load balancer's targets, and the tag on the
// load balancer's objects.
const (
	ConfigMap = "outsider"
	NodeLabel = "example.com/agent"
	Tag       = "owner=outsider"
)

// Deps is what an agent runs on: a cluster in main, kubefake in the test.
type Deps struct {
	Kube                kubernetes.Interface
	Node, IP, Namespace string // Namespace holds the ConfigMap and the Leases of the election and the gate
	Store               checkpoint.LKGStore
	Engine              lbrecon.Engine // the load-balancer provider
	Registry            *prometheus.Registry
	Mux                 *http.ServeMux // gets /metrics and /healthz
}

// Run runs one node's agent until ctx ends; it returns nil then.
func Run(ctx context.Context, d Deps) error {
	hooks, err := prommetrics.Agent(d.Registry, d.Node, nil)
	if err != nil {
		return err
	}
	source, err := configmapsource.New(configmapsource.Config{Client: d.Kube, Namespace: d.Namespace, Name: ConfigMap, Key: "settings.json"})
	if err != nil {
		return err
	}
	provider := nodestatus.NewProvider(nodestatus.ProviderConfig{})
	configs, err := checkpoint.New(checkpoint.Config[lbrecon.LoadBalancer]{
		Store: d.Store, Source: source, Conditions: provider, Metrics: hooks.Checkpoint,
		Parse: func(b []byte) (lb lbrecon.LoadBalancer, err error) { return lb, json.Unmarshal(b, &lb) },
		Validate: func(lb lbrecon.LoadBalancer) error {
			if lb.ID == "" {
				return nil
			}
			return lb.Validate()
		},
	})
	if err != nil {
		return err
	}
	nodes, err := nodestatus.New(nodestatus.Config{Client: d.Kube, Provider: provider, Metrics: hooks.Nodestatus, Node: &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: d.Node, Labels: map[string]string{NodeLabel: "outsider"}},
		Status:     corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: d.IP}}},
	}})
	if err != nil {
		return err
	}
	elector, err := lease.New(lease.Config{Client: d.Kube, Namespace: d.Namespace, Name: "outsider-leader", Identity: d.Node, Metrics: hooks.Election})
	if err != nil {
		return err
	}
	defer elector.Close()
	store, err := kubestore.New(kubestore.Config{Client: d.Kube, Namespace: d.Namespace, Gate: "outsider"})
	if err != nil {
		return err
	}
	health := nodestatus.NewNodeHealth(nodestatus.HealthRule{Conditions: []corev1.NodeConditionType{
		corev1.NodeReady, checkpoint.ConditionConfigOK, versiongate.ConditionReleaseReady}})
	lbConfig := lbrecon.Config{Engine: d.Engine, Tag: Tag, Metrics: hooks.LBRecon}
	var lb *lbrecon.LoadBalancerReconciler // kept across calls and terms while the ID stays
	var lbID string
	// The leader's work, called by the gate at each term's start, then periodically.
	reconcile := func(ctx context.Context, term election.Leadership) error {
		want := configs.Status().Config
		ctx = lbrecon.WithToken(ctx, term.Token()) // every provider write carries the term's token
		if err := lbrecon.TeardownExcept(ctx, lbConfig, want.ID); err != nil || want.ID == "" {
			return err
		}
		healthy, err := health.List(ctx, d.Kube, metav1.ListOptions{LabelSelector: NodeLabel})
		if err != nil {
			return err
		}
		if want.Targets = nodetargets.From(healthy); lb == nil || lbID != want.ID {
			lb, err = lbrecon.NewLoadBalancer(lbConfig, want)
			lbID = want.ID
		} else {
			err = lb.SetLoadBalancer(want)
		}
		if err != nil {
			return err
		}
		return lb.Reconcile(ctx)
	}
	gate, err := versiongate.New(versiongate.Config{Store: store, NodeID: d.Node, Version: Release,
		MinimumCompatibleRelease: Release.Release, Candidate: elector, Reconcile: reconcile,
		Conditions: provider, Metrics: hooks.Versiongate, RejoinAfterRecordLoss: true})
	if err != nil {
		return err
	}
	checks, err := healthz.New(
		healthz.Check{Name: election.DefaultHealthCheckName, Checker: elector.HealthCheck(20 * time.Second).Check},
		healthz.Check{Name: nodestatus.HeartbeatCheckName, Checker: nodes.HeartbeatCheck(0)},
		healthz.Check{Name: versiongate.RecordCheckName, Checker: gate.RecordCheck(time.Minute)},
		healthz.Check{Name: checkpoint.TrialCheckName, Checker: configs.TrialCheck(time.Minute)})
	if err != nil {
		return err
	}
	d.Mux.Handle("GET /metrics", promhttp.HandlerFor(d.Registry, promhttp.HandlerOpts{}))
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
	d := Deps{Registry: prometheus.NewRegistry(), Mux: http.NewServeMux(), Engine: lbrecontest.New(lbrecontest.Config{})} // no provider: in memory
	flag.StringVar(&d.Node, "node", host, "this node's name")
	flag.StringVar(&d.IP, "node-ip", "", "this node's InternalIP, its address in the load balancer")
	flag.StringVar(&d.Namespace, "namespace", "kube-system", "namespace of the ConfigMap and of the Leases")
	kubeconfig := flag.String("kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig; empty means in-cluster")
	stateDir := flag.String("state-dir", "/var/lib/outsider", "checkpoint directory")
	listen := flag.String("listen", ":8080", "address serving /metrics and /healthz")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, d, *kubeconfig, *stateDir, *listen); err != nil {
		fmt.Fprintln(os.Stderr, "outsider:", err)
		os.Exit(1)
	}
}

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
	g.Go(func() error { <-ctx.Done(); return srv.Close() })
	g.Go(func() error {
		if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	})
	g.Go(func() error { return Run(ctx, d) })
	return g.Wait()
}
