// Command servicecontroller runs k8s.io/cloud-provider's service
// controller (controllers/service) against an apiserver, with a cloud whose
// load balancer forwards every call over lbwire to the process that started
// it. It is the controller process of lbrecon/ccm's tests, built
// without the race detector: the controller has a data race of its own
// (v0.37.1 writes its cached Service at controller.go:339 outside the lock
// its node sync reads it under at :503), while the load balancer it drives
// stays in the test process, under the race detector.
//
// It runs until SIGINT or SIGTERM, or until its standard input ends (the
// test process that holds the other end died), and exits non-zero if the
// controller cannot start.
//
// Usage:
//
//	servicecontroller -kubeconfig FILE -url http://127.0.0.1:PORT [-cluster NAME] [-workers N]
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	cloudprovider "k8s.io/cloud-provider"
	servicecontroller "k8s.io/cloud-provider/controllers/service"
	"k8s.io/component-base/featuregate"
	controllersmetrics "k8s.io/component-base/metrics/prometheus/controllers"

	"github.com/reconkit/reconkit/lbrecon/ccm/internal/lbwire"
)

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of the apiserver")
	url := flag.String("url", "", "base URL of the lbwire handler serving the load balancer")
	cluster := flag.String("cluster", "test-cluster", "cluster name passed to the load balancer")
	workers := flag.Int("workers", 2, "service controller workers")
	flag.Parse()
	if err := run(*kubeconfig, *url, *cluster, *workers); err != nil {
		fmt.Fprintln(os.Stderr, "servicecontroller:", err)
		os.Exit(1)
	}
}

func run(kubeconfig, url, cluster string, workers int) error {
	if kubeconfig == "" || url == "" {
		return fmt.Errorf("-kubeconfig and -url are required")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return fmt.Errorf("reading %s: %w", kubeconfig, err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { // the parent's end of stdin closes when it dies
		_, _ = io.Copy(io.Discard, os.Stdin)
		cancel()
	}()

	factory := informers.NewSharedInformerFactory(cs, 0)
	ctrl, err := servicecontroller.New(&cloud{lb: &lbwire.Client{URL: url}}, cs,
		factory.Core().V1().Services(), factory.Core().V1().Nodes(), cluster, featuregate.NewFeatureGate())
	if err != nil {
		return fmt.Errorf("creating the service controller: %w", err)
	}
	factory.Start(ctx.Done())
	ctrl.Run(ctx, workers, controllersmetrics.NewControllerManagerMetrics("servicecontroller"))
	factory.Shutdown()
	return nil
}

// cloud is the smallest cloudprovider.Interface: load balancers only.
type cloud struct{ lb cloudprovider.LoadBalancer }

func (c *cloud) Initialize(cloudprovider.ControllerClientBuilder, <-chan struct{}) {}
func (c *cloud) LoadBalancer() (cloudprovider.LoadBalancer, bool)                  { return c.lb, true }
func (c *cloud) Instances() (cloudprovider.Instances, bool)                        { return nil, false }
func (c *cloud) InstancesV2() (cloudprovider.InstancesV2, bool)                    { return nil, false }
func (c *cloud) Zones() (cloudprovider.Zones, bool)                                { return nil, false }
func (c *cloud) Clusters() (cloudprovider.Clusters, bool)                          { return nil, false }
func (c *cloud) Routes() (cloudprovider.Routes, bool)                              { return nil, false }
func (c *cloud) ProviderName() string                                              { return "lbwire" }
func (c *cloud) HasClusterID() bool                                                { return true }
