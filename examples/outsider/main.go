package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/reconkit/reconkit/checkpoint"
	"github.com/reconkit/reconkit/election"
	"github.com/reconkit/reconkit/election/etcd"
	"github.com/reconkit/reconkit/election/lease"
	"github.com/reconkit/reconkit/lbrecon/lbrecontest"
	"github.com/reconkit/reconkit/versiongate"
	"github.com/reconkit/reconkit/versiongate/etcdstore"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "outsider:", err)
		os.Exit(1)
	}
}

func run() error {
	host, _ := os.Hostname()
	var (
		kubeconfig = flag.String("kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig of the cluster")
		endpoints  = flag.String("etcd", "http://127.0.0.1:2379", "etcd endpoints, comma-separated")
		backend    = flag.String("election", "etcd", "election backend: etcd or lease")
		node       = flag.String("node", host, "node name")
		nodeIP     = flag.String("node-ip", "10.0.0.1", "the node's internal IP")
		release    = flag.String("release", "1.0.0", "this agent's release")
		stateDir   = flag.String("state-dir", "/var/lib/outsider", "checkpoint directory")
		namespace  = flag.String("namespace", "kube-system", "namespace of the settings ConfigMap and the election Lease")
		configMap  = flag.String("configmap", "outsider", "name of the settings ConfigMap (key settings.json)")
	)
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	version, err := versiongate.ParseVersion(*release)
	if err != nil {
		return err
	}
	restCfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		return err
	}
	kube, err := kubernetes.NewForConfig(restCfg)
	if err != nil {
		return err
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: strings.Split(*endpoints, ",")})
	if err != nil {
		return err
	}
	defer cli.Close()

	var elector election.Elector
	switch *backend {
	case "etcd":
		e, err := etcd.New(etcd.Config{Client: cli, Prefix: "/outsider/leader", Identity: *node})
		if err != nil {
			return err
		}
		defer e.Close()
		elector = e
	case "lease":
		e, err := lease.New(lease.Config{Client: kube, Namespace: *namespace, Name: "outsider-leader", Identity: *node})
		if err != nil {
			return err
		}
		defer e.Close()
		elector = e
	default:
		return fmt.Errorf("unknown election backend %q", *backend)
	}
	gateStore, err := etcdstore.New(cli, etcdstore.Config{StatusKey: "/outsider/gate/status", NodesPrefix: "/outsider/gate/nodes/"})
	if err != nil {
		return err
	}
	store, err := checkpoint.NewFS(checkpoint.FSConfig{Dir: filepath.Join(*stateDir, "checkpoints")})
	if err != nil {
		return err
	}
	defer store.Close()

	agent, err := New(Deps{
		NodeName:  *node,
		NodeIP:    *nodeIP,
		Version:   version,
		Kube:      kube,
		Namespace: *namespace,
		ConfigMap: *configMap,
		Store:     store,
		Elector:   elector,
		GateStore: gateStore,
		// No load-balancer provider here: the in-memory engine stands in.
		Engine: lbrecontest.New(lbrecontest.Config{}),
	})
	if err != nil {
		return err
	}
	return agent.Run(ctx)
}
