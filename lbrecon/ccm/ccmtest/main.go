package ccmtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	cloudprovider "k8s.io/cloud-provider"
	servicecontroller "k8s.io/cloud-provider/controllers/service"
	"k8s.io/component-base/featuregate"
	controllersmetrics "k8s.io/component-base/metrics/prometheus/controllers"

	"github.com/reconkit/reconkit/lbrecon/ccm/internal/lbwire"
)

// envKey names the environment variable that makes a test binary the
// controller's process: it holds the process's childConfig as JSON.
const envKey = "RECONKIT_CCMTEST_CONTROLLER"

// readyFD is the file descriptor on which the controller's process
// reports that its informers synced: the first of exec.Cmd.ExtraFiles.
const readyFD = 3

// childConfig is what the controller's process is told.
type childConfig struct {
	Kubeconfig string  `json:"kubeconfig"`
	QPS        float32 `json:"qps,omitempty"`
	Burst      int     `json:"burst,omitempty"`
	URL        string  `json:"url"`
	Cluster    string  `json:"cluster"`
	Workers    int     `json:"workers"`
}

// Main is the test binary's entry point for [Start]: call it from the
// package's TestMain, as
//
//	func TestMain(m *testing.M) { os.Exit(ccmtest.Main(m)) }
//
// In the test process it returns m.Run(). In a controller's process
// (the same test binary, started again by Start) it runs the service
// controller until it is stopped, killed, or the test process dies, and
// returns the exit code; it never returns to the tests. m is a
// *testing.M, or anything that wraps one (such as a leak checker's).
func Main(m interface{ Run() int }) int {
	spec, ok := os.LookupEnv(envKey)
	if !ok {
		return m.Run()
	}
	if err := runController(spec); err != nil {
		fmt.Fprintln(os.Stderr, "ccmtest: controller:", err)
		return 1
	}
	return 0
}

// runController is the controller's process: k8s.io/cloud-provider's
// service controller on the apiserver of the kubeconfig, its load balancer
// forwarding every call to the test process. It runs until SIGTERM or
// SIGINT, or until its standard input ends (the test process died).
func runController(spec string) error {
	var cfg childConfig
	if err := json.Unmarshal([]byte(spec), &cfg); err != nil {
		return fmt.Errorf("decoding %s: %w", envKey, err)
	}
	rc, err := clientcmd.BuildConfigFromFlags("", cfg.Kubeconfig)
	if err != nil {
		return fmt.Errorf("reading the kubeconfig: %w", err)
	}
	rc.QPS, rc.Burst = cfg.QPS, cfg.Burst
	rc.UserAgent = "ccmtest-service-controller"
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { // the test process's end of stdin closes when it dies
		_, _ = io.Copy(io.Discard, os.Stdin)
		cancel()
	}()

	factory := informers.NewSharedInformerFactory(cs, 0)
	services, nodes := factory.Core().V1().Services(), factory.Core().V1().Nodes()
	ctrl, err := servicecontroller.New(&cloud{lb: &lbwire.Client{URL: cfg.URL}}, cs, services, nodes, cfg.Cluster,
		featuregate.NewFeatureGate())
	if err != nil {
		return fmt.Errorf("creating the service controller: %w", err)
	}
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), services.Informer().HasSynced, nodes.Informer().HasSynced) {
		return errors.New("stopped before the informers synced")
	}
	ready := os.NewFile(readyFD, "ready")
	if ready == nil {
		return errors.New("no readiness pipe: started other than by ccmtest.Start")
	}
	_, err = ready.Write([]byte("ready\n"))
	ready.Close()
	if err != nil {
		return fmt.Errorf("reporting readiness: %w", err)
	}
	ctrl.Run(ctx, cfg.Workers, controllersmetrics.NewControllerManagerMetrics("ccmtest"))
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
func (c *cloud) ProviderName() string                                              { return "ccmtest" }
func (c *cloud) HasClusterID() bool                                                { return true }
