package kubestore_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	k8stesting "k8s.io/client-go/testing"

	"github.com/reconkit/reconkit/kubefake"
	"github.com/reconkit/reconkit/versiongate"
	"github.com/reconkit/reconkit/versiongate/versiongatetest"
)

// requestLog records, on the clock of the synctest bubble, every request
// a kubefake server serves to one client.
type requestLog struct {
	mu    sync.Mutex
	start time.Time
	at    []time.Time
	verbs []string
}

// fault makes a fault that lets every request through and records it;
// inject it before any other fault.
func (r *requestLog) fault() kubefake.Fault {
	return kubefake.Fault{
		Match: func(a k8stesting.Action) bool {
			r.mu.Lock()
			defer r.mu.Unlock()
			r.at = append(r.at, time.Now())
			r.verbs = append(r.verbs, a.GetVerb())
			return false
		},
	}
}

// between counts the requests of verb ("" for any) at or after from and
// before to, both offsets from start.
func (r *requestLog) between(verb string, from, to time.Duration) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for i, at := range r.at {
		d := at.Sub(r.start)
		if d >= from && d < to && (verb == "" || r.verbs[i] == verb) {
			n++
		}
	}
	return n
}

// waitingGate is a gate of node n1 at release 1.0, with records the host
// owns, so that WaitReady alone talks to the server: a read of the status
// and a watch of it.
func waitingGate(t *testing.T, cs kubernetes.Interface, gate string) *versiongate.Gate {
	t.Helper()
	g, err := versiongate.New(versiongate.Config{
		Store: newStore(t, cs, gate, nil), NodeID: "n1", Version: version(t, "1.0.0"),
		MinimumCompatibleRelease: versiongate.Release{Major: 1},
		Decode: func(string, []byte) (versiongate.Release, bool, error) {
			return versiongate.Release{}, false, nil
		},
	})
	require.NoError(t, err)
	return g
}

// writeStatus fences the gate's status with a new term and writes st.
func writeStatus(t *testing.T, ctx context.Context, cs kubernetes.Interface, gate string, tok uint64, st versiongate.Status) {
	t.Helper()
	b, err := st.Encode()
	require.NoError(t, err)
	s := newStore(t, cs, gate, nil)
	term := versiongatetest.NewTerm("writer", tok)
	require.NoError(t, s.Fence(ctx, term))
	require.NoError(t, s.WriteStatus(ctx, term, b, 0))
}

func statusAt(t *testing.T, v string, minimum versiongate.Release) versiongate.Status {
	return versiongate.Status{State: versiongate.StateDone, Version: version(t, v), MinimumCompatibleRelease: minimum}
}

// churn writes n Leases unrelated to any gate, so that the server's watch
// history moves past every earlier change.
func churn(t *testing.T, ctx context.Context, cs kubernetes.Interface, prefix string, n int) {
	t.Helper()
	for i := range n {
		_, err := cs.CoordinationV1().Leases(testNamespace).Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", prefix, i)}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
}

// Whatever the server answers persistently, a node waiting for its status
// backs off: after 30s of one answer it sends at most one request a second
// (a read, or a read and a watch, every 5s at least), and keeps trying.
// Each answer is served for two minutes of the bubble's time, counted from
// 30s to 120s.
func TestReadinessRetriesBackOff(t *testing.T) {
	gr := schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}
	for _, tc := range []struct {
		name string
		// set prepares the Leases through cs, and returns the faults that
		// make the server answer persistently; gate is the gate's name.
		set func(t *testing.T, ctx context.Context, cs kubernetes.Interface, gate string) []kubefake.Fault
	}{
		{"status terminating", func(t *testing.T, ctx context.Context, cs kubernetes.Interface, gate string) []kubefake.Fault {
			writeStatus(t, ctx, cs, gate, 3, statusAt(t, "2.0.0", versiongate.Release{Major: 1}))
			require.NoError(t, cs.CoordinationV1().Leases(testNamespace).Delete(ctx, gate+"-status", metav1.DeleteOptions{}))
			return nil
		}},
		{"name clash", func(t *testing.T, ctx context.Context, cs kubernetes.Interface, gate string) []kubefake.Fault {
			_, err := cs.CoordinationV1().Leases(testNamespace).Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: gate + "-status"}}, metav1.CreateOptions{})
			require.NoError(t, err)
			return nil
		}},
		{"403", func(*testing.T, context.Context, kubernetes.Interface, string) []kubefake.Fault {
			return []kubefake.Fault{kubefake.Fault{Resource: "leases", Answer: kubefake.Fail(apierrors.NewForbidden(gr, "", fmt.Errorf("RBAC: no")))}}
		}},
		{"410 on every watch", func(t *testing.T, ctx context.Context, cs kubernetes.Interface, gate string) []kubefake.Fault {
			writeStatus(t, ctx, cs, gate, 3, statusAt(t, "2.0.0", versiongate.Release{Major: 2}))
			return []kubefake.Fault{kubefake.Fault{Verb: "watch", Answer: kubefake.Fail(apierrors.NewResourceExpired("too old resource version"))}}
		}},
		{"500", func(*testing.T, context.Context, kubernetes.Interface, string) []kubefake.Fault {
			return []kubefake.Fault{kubefake.Fault{Resource: "leases", Answer: kubefake.InternalError()}}
		}},
		{"503", func(*testing.T, context.Context, kubernetes.Interface, string) []kubefake.Fault {
			return []kubefake.Fault{kubefake.Fault{Resource: "leases", Answer: kubefake.Unavailable()}}
		}},
		{"429", func(*testing.T, context.Context, kubernetes.Interface, string) []kubefake.Fault {
			return []kubefake.Fault{kubefake.Fault{Resource: "leases", Answer: kubefake.TooManyRequests(1)}}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				srv := kubefake.Config{}.NewServer()
				cs := srv.NewClient().Clientset
				node := srv.NewClient()
				faults := tc.set(t, ctx, cs, "persist")
				log := &requestLog{start: time.Now()}
				srv.Inject(log.fault())
				for _, f := range faults {
					srv.Inject(f)
				}
				g := waitingGate(t, node.Clientset, "persist")
				ready := make(chan error, 1)
				go func() { ready <- g.WaitReady(ctx) }()
				time.Sleep(2 * time.Minute)
				synctest.Wait()
				select {
				case err := <-ready:
					t.Fatalf("WaitReady returned: %v", err)
				default:
				}
				first, after := log.between("", 0, 30*time.Second), log.between("", 30*time.Second, 2*time.Minute)
				t.Logf("%d requests in the first 30s, %d in the 90s after", first, after)
				require.LessOrEqual(t, first, 30, "requests in the first 30s")
				require.LessOrEqual(t, after, 90/5*2+2, "requests from 30s to 120s: more than a read and a watch per 5s")
				require.GreaterOrEqual(t, after, 90/15, "requests from 30s to 120s: it stopped trying")
				cancel()
				require.ErrorIs(t, <-ready, context.Canceled)
			})
		})
	}
}
