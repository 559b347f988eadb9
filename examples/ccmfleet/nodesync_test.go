package ccmfleet_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	cloudprovider "k8s.io/cloud-provider"

	"github.com/reconkit/reconkit/examples/ccmfleet"
	"github.com/reconkit/reconkit/kubefake"
)

// nodeRecorder is a recorder whose UpdateLoadBalancer records the nodes it
// is given ("update node-a,node-b") and fails with updateErr.
type nodeRecorder struct {
	*recorder
	updateErr error
}

func (r *nodeRecorder) UpdateLoadBalancer(_ context.Context, _ string, _ *v1.Service, nodes []*v1.Node) error {
	names := make([]string, 0, len(nodes))
	for _, n := range nodes {
		names = append(names, n.Name)
	}
	r.record("update " + strings.Join(names, ","))
	return r.updateErr
}

// startDriver runs a Driver over c and lb in the caller's synctest bubble
// until the test ends.
func startDriver(t *testing.T, c kubernetes.Interface, lb cloudprovider.LoadBalancer) {
	t.Helper()
	drv, err := ccmfleet.New(ccmfleet.Config{Client: c, Balancer: lb})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error)
	go func() { done <- drv.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
}

// newCalls returns the calls lb recorded since the last newCalls.
func newCalls(lb *nodeRecorder, seen *int) []string {
	calls := lb.Calls()
	out := calls[*seen:]
	*seen = len(calls)
	return out
}

// Node sync calls UpdateLoadBalancer, with the stable nodes, when a node
// joins, leaves, or changes its exclusion label, as the controller's node
// informer handlers and nodeSyncService do; a node turning NotReady, or
// nothing changing, calls nothing.
func TestNodeSync(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := kubefake.NewClientset(service("web", 80), node("node-a", "10.0.1.1"))
		lb := &nodeRecorder{recorder: &recorder{exists: true}}
		startDriver(t, c, lb)
		seen := 0
		step := func(what string, edit func() error, want ...string) {
			t.Helper()
			if edit != nil {
				if err := edit(); err != nil {
					t.Fatalf("%s: %v", what, err)
				}
			}
			<-time.After(10 * time.Second)
			if got := newCalls(lb, &seen); !slices.Equal(got, want) {
				t.Fatalf("%s: calls %q, want %q", what, got, want)
			}
		}
		ctx := t.Context()
		step("start", nil, "ensure")
		step("nothing changes", nil)
		step("node-b joins", func() error { return createNode(ctx, c, node("node-b", "10.0.1.2")) }, "update node-a,node-b")
		step("node-a NotReady", func() error { return setReady(ctx, c, "node-a", v1.ConditionFalse) })
		step("node-a excluded", func() error { return setExcluded(ctx, c, "node-a", true) }, "update node-b")
		step("node-a included", func() error { return setExcluded(ctx, c, "node-a", false) }, "update node-a,node-b")
		step("node-b leaves", func() error { return deleteNode(ctx, c, "node-b") }, "update node-a")
		step("a Service of type ClusterIP", func() error {
			svc := clusterIPWithFinalizer()
			svc.Name, svc.Finalizers = "internal", nil
			_, err := c.CoreV1().Services(namespace).Create(ctx, svc, metav1.CreateOptions{})
			if err != nil {
				return err
			}
			return createNode(ctx, c, node("node-c", "10.0.1.3"))
		}, "update node-a,node-c")
	})
}

// A failed UpdateLoadBalancer of a load balancer that exists queues the
// Service at once (serviceQueue.Add, no backoff), whose EnsureLoadBalancer
// then gives it the nodes; one that GetLoadBalancer says does not exist is
// left alone.
func TestFailedNodeSyncQueuesTheService(t *testing.T) {
	for _, exists := range []bool{true, false} {
		synctest.Test(t, func(t *testing.T) {
			c := kubefake.NewClientset(service("web", 80), node("node-a", "10.0.1.1"))
			lb := &nodeRecorder{recorder: &recorder{exists: exists}, updateErr: errors.New("provider refused")}
			startDriver(t, c, lb)
			seen := 0
			<-time.After(10 * time.Second)
			newCalls(lb, &seen)
			if err := createNode(t.Context(), c, node("node-b", "10.0.1.2")); err != nil {
				t.Fatal(err)
			}
			// The next Resync sees node-b and syncs the nodes; the Service
			// queued then is processed within a second, not after the 5 s
			// of a backoff.
			for deadline := time.Now().Add(10 * time.Second); !slices.ContainsFunc(lb.Calls(), func(s string) bool {
				return strings.HasPrefix(s, "update")
			}); {
				if time.Now().After(deadline) {
					t.Fatalf("exists %v: no node sync 10 s after node-b joined: calls %q", exists, lb.Calls())
				}
				<-time.After(100 * time.Millisecond)
			}
			<-time.After(time.Second)
			want := []string{"update node-a,node-b", "get"}
			if exists {
				want = append(want, "ensure")
			}
			if got := newCalls(lb, &seen); !slices.Equal(got, want) {
				t.Fatalf("exists %v: calls %q, want %q", exists, got, want)
			}
		})
	}
}

// A Balancer that fails every call, with nodes joining and leaving every
// 7 s, costs no more calls than the per-Service backoff allows and one
// node sync per node change: node sync retries nothing itself.
func TestNodeChurnDoesNotSpin(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := kubefake.NewClientset(service("web", 80), node("node-a", "10.0.1.1"))
		lb := &nodeRecorder{recorder: &recorder{exists: true, ensureErr: errors.New("down"), getErr: errors.New("down")},
			updateErr: errors.New("down")}
		startDriver(t, c, lb)
		changes := 0
		for end := time.Now().Add(10 * time.Minute); time.Now().Before(end); changes++ {
			var err error
			if changes%2 == 0 {
				err = createNode(t.Context(), c, node("node-b", "10.0.1.2"))
			} else {
				err = deleteNode(t.Context(), c, "node-b")
			}
			if err != nil {
				t.Fatal(err)
			}
			<-time.After(7 * time.Second)
		}
		// Each node change: an update, a get, and the Service queued at once,
		// an ensure: 3 calls. Backoff alone would allow about 12 in 10 min.
		if n, max := len(lb.Calls()), 3*changes+15; n > max {
			t.Fatalf("%d calls in 10 minutes of %d node changes, want at most %d", n, changes, max)
		}
	})
}
