package kubestore_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	coordclient "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/reconkit/reconkit/internal/testenv"
	"github.com/reconkit/reconkit/kubefake"
	"github.com/reconkit/reconkit/versiongate"
	"github.com/reconkit/reconkit/versiongate/kubestore"
)

const testNamespace = "gates"

var gateSeq atomic.Int64

// uniqueGate returns a gate name not used before in this test binary.
func uniqueGate(prefix string) string { return fmt.Sprintf("%s-%d", prefix, gateSeq.Add(1)) }

// apiServer starts a kube-apiserver with the test namespace and returns
// its client configuration.
func apiServer(t *testing.T) *rest.Config {
	t.Helper()
	a := testenv.APIServer(t)
	cfg := a.Config()
	cs := clientFor(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: testNamespace}}, metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) {
		require.NoError(t, err, "creating the test namespace")
	}
	return cfg
}

func clientFor(t *testing.T, cfg *rest.Config) kubernetes.Interface {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	return cs
}

func newStore(t *testing.T, cs kubernetes.Interface, gate string, clk clock.WithTicker) *kubestore.Store {
	t.Helper()
	st, err := kubestore.New(kubestore.Config{Client: cs, Namespace: testNamespace, Gate: gate, Clock: clk})
	require.NoError(t, err)
	return st
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func base64Decode(s string) ([]byte, error) { return base64.StdEncoding.DecodeString(s) }

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

type (
	k8stestingAction = k8stesting.Action
	runtimeObject    = runtime.Object
)

func apiForbidden(resource, verb string) error {
	return apierrors.NewForbidden(schema.GroupResource{Group: "coordination.k8s.io", Resource: resource}, "", fmt.Errorf("user cannot %s", verb))
}

// apiNotServed is the 404 of a resource the server does not serve, as
// client-go reports it: no object named.
func apiNotServed() error {
	return apierrors.NewGenericServerResponse(404, "GET", schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}, "", "the server could not find the requested resource", 0, true)
}

func newFakeClock() *clocktesting.FakeClock { return clocktesting.NewFakeClock(time.Now()) }

// await waits for ch to deliver or close, failing t after a minute.
func await[T any](t testing.TB, ch <-chan T, what string) {
	t.Helper()
	tm := time.NewTimer(time.Minute)
	defer tm.Stop()
	select {
	case <-ch:
	case <-tm.C:
		t.Fatalf("%s did not happen within a minute", what)
	}
}

// runWatch runs st's ListRecords and then WatchRecords until the test
// ends, as a gate does: st then takes part in holding the gate's reaper
// Lease, and reaps while it holds it.
func runWatch(t *testing.T, st versiongate.Store) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, rev, err := st.ListRecords(ctx)
		if err != nil {
			return
		}
		_ = st.WatchRecords(ctx, rev, func([]versiongate.Record, int64) {})
	}()
	t.Cleanup(func() { cancel(); <-done })
}

// fakeWorld is what a synctest test of stores on kubefake starts from: a
// context that ends with the test, the clientset, its Leases in the test
// namespace, and a fake clock for the stores, which advance steps.
type fakeWorld struct {
	ctx    context.Context
	cs     *fake.Clientset
	leases coordclient.LeaseInterface
	clk    *clocktesting.FakeClock
}

func newFakeWorld(t *testing.T) fakeWorld {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	cs := kubefake.NewClientset()
	return fakeWorld{ctx: ctx, cs: cs, leases: cs.CoordinationV1().Leases(testNamespace), clk: newFakeClock()}
}

// advance steps clk by d, at most a second at a time, in a synctest
// bubble: after each step every goroutine of the bubble settles
// (synctest.Wait), so that what a step set off (a request, a timer armed
// for later) is done before the next step.
func advance(clk *clocktesting.FakeClock, d time.Duration) {
	for end := clk.Now().Add(d); clk.Now().Before(end); {
		clk.Step(min(time.Second, end.Sub(clk.Now())))
		synctest.Wait()
	}
}

// advanceUntil steps clk as advance does, 100ms at a time, until cond
// holds, and returns the fake time that took; it fails t once limit has
// passed.
func advanceUntil(t testing.TB, clk *clocktesting.FakeClock, limit time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := clk.Now()
	for !cond() {
		if clk.Since(start) > limit {
			t.Fatalf("%s did not happen within %v of fake time", what, limit)
		}
		clk.Step(100 * time.Millisecond)
		synctest.Wait()
	}
	return clk.Since(start)
}

// stepUntil steps clk a second at a time, every 10ms of real time, until
// done closes, so that the reaper, on other goroutines, keeps up with the
// clock; it fails t after a minute.
func stepUntil(t testing.TB, clk *clocktesting.FakeClock, done <-chan struct{}, what string) {
	t.Helper()
	deadline := time.NewTimer(time.Minute)
	defer deadline.Stop()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-done:
			return
		case <-deadline.C:
			t.Fatalf("%s did not happen within a minute", what)
		case <-tick.C:
			clk.Step(time.Second)
		}
	}
}
