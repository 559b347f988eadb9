// Package ccmtest runs k8s.io/cloud-provider's service controller (the
// one a cloud-controller-manager runs, controllers/service) against a
// user's cloudprovider.LoadBalancer in the user's own tests, on a real
// apiserver, under the race detector.
//
//	func TestMain(m *testing.M) { ccmtest.Main(m) }
//
//	func TestMyBalancer(t *testing.T) {
//		cfg := ...                            // a *rest.Config: envtest, kind, testenv
//		ctrl, err := ccmtest.Start(t.Context(), ccmtest.Config{REST: cfg, Balancer: myBalancer})
//		if err != nil {
//			t.Fatal(err)
//		}
//		t.Cleanup(func() { ctrl.Stop() })
//		// create Nodes and a Service of type LoadBalancer; wait for its
//		// status.loadBalancer.ingress; delete it; wait for it to go.
//	}
//
// The controller runs in a process of its own (the test binary, started
// again: hence [Main] in TestMain, which returns in both processes and
// lets the testing package end the process, never this package).
// That process reports its readiness, its end and any failure to the test
// process over a pipe, never through its exit code. Every load-balancer
// call it makes
// is forwarded over a loopback HTTP connection to the Balancer in the test
// process, which runs there under -race with the test's checks. [Start]
// returns once the controller's informers synced; [Controller.Stop] stops
// it as an operator would, [Controller.Kill] crashes it (SIGKILL) and ends
// the contexts of its calls in flight; both return once those calls
// returned. A killed controller and a new [Start] are a restarted
// cloud-controller-manager; two Controllers on one apiserver are two
// leaders at once, which a test of fencing may want and no other should.
//
// # Why a process of its own
//
// Two properties of k8s.io/cloud-provider v0.37.1's service controller
// make it unfit to run inside a test process:
//
//   - It has a data race of its own. It writes its cached Service
//     (controllers/service/controller.go:339, processServiceCreateOrUpdate)
//     outside the lock its node sync reads it under (:503,
//     serviceCache.allServices). Under -race, the report fails the test
//     whatever the Balancer does. In the controller's process the race
//     detector's reports go to files of their own (GORACE log_path; see
//     [Controller.RaceReports]), never to the test.
//   - It hangs inside a testing/synctest bubble. Every error other than
//     a RetryError that a Balancer returns reaches apimachinery's
//     runtime.HandleError, whose default rate limiter
//     (runtime.ErrorHandlers) sleeps its 1 ms period minus the time since
//     the last error, and that last error is the real time at which the
//     package was initialised. A bubble's clock starts in 2000, so the first
//     error sleeps some 26 fake years: the worker hangs, or, once the bubble
//     is idle, every timer fires at once. In a process of its own the
//     controller runs on real time. Do not call Start inside a bubble
//     either: the calls arrive over a loopback connection, which a bubble
//     does not see as durably blocking, so its clock would not advance
//     while a call is awaited. Test a Balancer inside a bubble by calling
//     its methods directly, as the controller does (see lbrecon/ccm's
//     tests); run it under the real controller with this package, on real
//     time.
//
// # What a test needs
//
//   - A *rest.Config of a running apiserver. Inside reconkit,
//     internal/testenv starts one; outside, controller-runtime's envtest
//     (sigs.k8s.io/controller-runtime/pkg/envtest), a kind cluster or any
//     other gives one. Its credentials cross to the controller's process
//     as a kubeconfig (see [Config]): a Go value in it (a transport, a
//     dialer) cannot.
//   - Nodes: the controller passes the Balancer the Nodes the apiserver
//     holds (none is a Warning "UnAvailableLoadBalancer", and no call).
//     A test creates them; a bare apiserver has no kubelet.
//   - Nothing else: the service controller needs no other controller; the
//     garbage collector (kube-controller-manager) only matters for objects
//     owned by a deleted Service, such as lbrecon/ccm's journal ConfigMaps.
//
// # What it guarantees
//
//   - Start fails with ErrNotReady, naming the fix, when the test binary's
//     TestMain does not call Main (TestStartWithoutMainSaysSo), and with
//     ErrUnsupportedConfig on a rest.Config it cannot pass on
//     (TestKubeconfigCarriesTheCredentials).
//   - Every call reaches the Balancer with its arguments and comes back
//     with its results; a RetryError keeps its delay
//     (TestServiceConvergesAndIsDeleted, lbrecon/ccm/internal/lbwire).
//   - Stop and Kill return only once the calls in flight returned, and
//     Kill ends their contexts (TestKillEndsTheCallsInFlight).
//   - A process that exits on its own is reported by Done and Err, with
//     the reason it reported, or, when it reported none, as crashed
//     (TestExitOnItsOwnIsReported); a process that fails before it is
//     ready makes Start fail with ErrNotReady and the failure it reported
//     (TestChildFailureIsReported).
package ccmtest
