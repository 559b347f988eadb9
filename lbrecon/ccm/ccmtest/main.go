package ccmtest

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"testing"

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

// reportFD is the file descriptor on which the controller's process
// reports to the test process: the first of exec.Cmd.ExtraFiles. It
// carries one line per report (see the report constants), and its end
// (the process exited) follows the last.
const reportFD = 3

// The reports the controller's process writes on reportFD, one a line:
// reportReady once its informers synced, then at most one of
// reportStopped (the controller ended because it was asked to: a signal,
// or the test process's end of its standard input closed) and
// reportFailed (it could not run). Each but reportReady is followed by
// ": " and the reason, on one line. A process that exits without either
// crashed or was killed.
const (
	reportReady   = "ready"
	reportStopped = "stopped"
	reportFailed  = "failed"
)

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
//	func TestMain(m *testing.M) { ccmtest.Main(m) }
//
// In the test process it runs m.Run() and returns; the testing package
// then exits with m.Run's code (a TestMain that returns does so since Go
// 1.15). In a controller's process (the same test binary, started again
// by Start) it runs the service controller until it is stopped, killed,
// or the test process dies, and returns without running any test. The
// controller's process reports its readiness, its end and any failure to
// the test process over a pipe, so the test process never reads its exit
// code: nothing after Main in TestMain needs to set one.
func Main(m *testing.M) {
	spec, ok := os.LookupEnv(envKey)
	if !ok {
		m.Run()
		return
	}
	runChild(spec)
}

// runChild is the whole of a controller's process: it runs the
// controller and reports on reportFD how it ended.
func runChild(spec string) {
	rep := os.NewFile(reportFD, "report")
	if rep == nil {
		fmt.Fprintln(os.Stderr, "ccmtest: controller: no report pipe: started other than by ccmtest.Start")
		return
	}
	defer rep.Close()
	reason, err := runController(spec, func() error {
		_, err := fmt.Fprintln(rep, reportReady)
		return err
	})
	line := reportStopped + ": " + reason
	if err != nil {
		fmt.Fprintln(os.Stderr, "ccmtest: controller:", err)
		line = reportFailed + ": " + err.Error()
	}
	// One line: the test process reads the report line by line.
	_, _ = fmt.Fprintln(rep, strings.ReplaceAll(line, "\n", " "))
}

// runController is the controller's process: k8s.io/cloud-provider's
// service controller on the apiserver of the kubeconfig, its load balancer
// forwarding every call to the test process. It calls ready once the
// informers synced, and runs until SIGTERM or SIGINT, or until its
// standard input ends (the test process died). It returns why it stopped,
// or why it could not run.
func runController(spec string, ready func() error) (string, error) {
	var cfg childConfig
	if err := json.Unmarshal([]byte(spec), &cfg); err != nil {
		return "", fmt.Errorf("decoding %s: %w", envKey, err)
	}
	rc, err := clientcmd.BuildConfigFromFlags("", cfg.Kubeconfig)
	if err != nil {
		return "", fmt.Errorf("reading the kubeconfig: %w", err)
	}
	rc.QPS, rc.Burst = cfg.QPS, cfg.Burst
	rc.UserAgent = "ccmtest-service-controller"
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return "", fmt.Errorf("creating the client: %w", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	errStdin := errors.New("the test process's end of standard input closed")
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	go func() { // the test process's end of stdin closes when it dies
		_, _ = io.Copy(io.Discard, os.Stdin)
		cancel(errStdin)
	}()

	factory := informers.NewSharedInformerFactory(cs, 0)
	services, nodes := factory.Core().V1().Services(), factory.Core().V1().Nodes()
	ctrl, err := servicecontroller.New(&cloud{lb: &lbwire.Client{URL: cfg.URL}}, cs, services, nodes, cfg.Cluster,
		featuregate.NewFeatureGate())
	if err != nil {
		return "", fmt.Errorf("creating the service controller: %w", err)
	}
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	if !cache.WaitForCacheSync(ctx.Done(), services.Informer().HasSynced, nodes.Informer().HasSynced) {
		return "", fmt.Errorf("stopped before the informers synced: %w", context.Cause(ctx))
	}
	if err := ready(); err != nil {
		return "", fmt.Errorf("reporting readiness: %w", err)
	}
	ctrl.Run(ctx, cfg.Workers, controllersmetrics.NewControllerManagerMetrics("ccmtest"))
	if err := context.Cause(ctx); err != nil {
		return err.Error(), nil
	}
	return "", errors.New("the service controller returned while its context lasted")
}

// childReport is what the test process read from the controller's
// process's report pipe.
type childReport struct {
	ready bool
	end   string // its last report other than reportReady, or ""
}

// readReports reads the reports from r until it ends, sending on readyCh
// (buffered) once: nil at reportReady, or an error if the pipe ended or
// failed first. It returns everything it read.
func readReports(r io.Reader, readyCh chan<- error) childReport {
	var rep childReport
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		if line == reportReady && !rep.ready {
			rep.ready = true
			readyCh <- nil
			continue
		}
		rep.end = line
	}
	if !rep.ready {
		err := sc.Err()
		if err == nil {
			err = io.EOF
		}
		readyCh <- err
	}
	return rep
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
