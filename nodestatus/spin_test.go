package nodestatus_test

import (
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/reconkit/reconkit/kubefake"
	"github.com/reconkit/reconkit/nodestatus/nodestatustest"
)

// Every loop of the controller (ping, renewal, status report, the retries
// of each, re-reading and re-registering a Node) waits when the other side
// answers at once, whatever it answers: a success, an error, a 0 Retry-After
// hint. Each case counts the calls over one minute of a synctest bubble's
// time, which moves on only while the controller is blocked, straight to
// its next timer, against a bound far below what a loop without a wait
// makes.
func TestLoopsWaitWhenAnsweredAtOnce(t *testing.T) {
	gr := schema.GroupResource{Resource: "nodes"}
	for _, tc := range []struct {
		name string
		// adversary installs the reactors once the controller is idle
		// (the fake clientset's reactors may not change while it is
		// called); a status change then starts a write. key names the
		// calls counted (see countVerbs), or "ping".
		adversary func(cs *fake.Clientset, p *nodestatustest.Provider)
		key       string
		max       int
	}{
		{"ping succeeds at once", func(*fake.Clientset, *nodestatustest.Provider) {}, "ping", 7},
		{"ping fails at once", func(_ *fake.Clientset, p *nodestatustest.Provider) { p.SetPingError(errors.New("down")) }, "ping", 7},
		{"renewal succeeds at once", func(*fake.Clientset, *nodestatustest.Provider) {}, "update leases", 6},
		{"renewal fails at once", func(cs *fake.Clientset, _ *nodestatustest.Provider) {
			cs.PrependReactor("update", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
				return true, nil, apierrors.NewInternalError(errors.New("etcd is down"))
			})
		}, "update leases", 30},
		{"renewal answered 429 with Retry-After 0", func(cs *fake.Clientset, _ *nodestatustest.Provider) {
			cs.PrependReactor("update", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
				return true, nil, apierrors.NewTooManyRequests("slow down", 0)
			})
		}, "update leases", 30},
		{"status report succeeds at once", func(*fake.Clientset, *nodestatustest.Provider) {}, "patch nodes/status", 3},
		{"status write always stale (409)", func(cs *fake.Clientset, p *nodestatustest.Provider) {
			cs.PrependReactor("patch", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
				return true, nil, apierrors.NewConflict(gr, "vk-0", errors.New("stale"))
			})
		}, "patch nodes/status", 60},
		{"status write answered 404 though the Node is there", func(cs *fake.Clientset, p *nodestatustest.Provider) {
			cs.PrependReactor("patch", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
				return true, nil, apierrors.NewNotFound(gr, "vk-0")
			})
		}, "get nodes", 60},
		{"Node gone after every registration", func(cs *fake.Clientset, p *nodestatustest.Provider) {
			cs.PrependReactor("get", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
				return true, nil, apierrors.NewNotFound(gr, "vk-0")
			})
			cs.PrependReactor("patch", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
				return true, nil, apierrors.NewNotFound(gr, "vk-0")
			})
			cs.PrependReactor("create", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
				return true, nil, apierrors.NewAlreadyExists(gr, "vk-0")
			})
		}, "create nodes", 60},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cs := kubefake.NewClientset()
				p := nodestatustest.NewProvider(testNode("vk-0"))
				cfg := bubbleConfig(cs, p)
				cfg.StatusReportInterval, cfg.ReRegister = time.Minute, true
				c := start(t, cfg)
				waitReady(t, c)
				synctest.Wait()
				pings := p.Pings()
				tc.adversary(cs, p)
				v := countVerbs(cs) // in front of the adversary's reactors
				p.UpdateStatus(func(n *corev1.Node) { n.Labels["new"] = "label" })
				count := func() int {
					if tc.key == "ping" {
						return p.Pings() - pings
					}
					return v.get(tc.key)
				}
				pass(time.Minute)
				got := count()
				t.Logf("%d calls in a minute of fake time", got)
				require.LessOrEqual(t, got, tc.max, "calls in a minute")
				if tc.max > 7 {
					require.Greater(t, got, 3, "the adversary was reached and retried")
				}
			})
		})
	}
}
