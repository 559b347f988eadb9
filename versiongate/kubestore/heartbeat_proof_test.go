package kubestore_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/reconkit/reconkit/election/lease"
	"github.com/reconkit/reconkit/internal/servers"
	"github.com/reconkit/reconkit/internal/testenv"
	"github.com/reconkit/reconkit/nodestatus"
	"github.com/reconkit/reconkit/versiongate"
	"github.com/reconkit/reconkit/versiongate/internal/storecheck"
	"github.com/reconkit/reconkit/versiongate/kubestore"
	"github.com/reconkit/reconkit/versiongate/versiongatetest"
)

// nodeLeaseProofBackend is the Kubernetes store with records on node
// Leases for the storecheck drivers: each start of a node runs a
// nodestatus controller that registers the Node and renews its Lease in
// kube-node-lease (for leaseDuration, every quarter of it: a record's TTL
// is its node Lease's duration), and the node's store takes the
// controller's LeaseRenewal as its heartbeat, so that the heartbeat is
// what keeps the node's record alive. As in kubeBackend, each start gets
// a client of its own through a proxy of its own, shared by its
// heartbeat, store and election: a cut holds all three, so the node's
// record stops being renewed exactly when its gate can no longer reach
// the server. A crash cuts and closes the proxy before the controller
// stops, so no renewal reaches the server afterwards. RestartServer
// restarts the apiserver on the same port and storage.
func nodeLeaseProofBackend(t *testing.T, leaseDuration time.Duration) storecheck.Backend {
	t.Helper()
	a := testenv.APIServer(t)
	obs := proofClient(t, a, a.Addr())
	createNamespace(t, obs, testNamespace)
	gate := "hbproof"
	wire := newWireCounts(t)
	none := func(string) (time.Time, types.UID, bool) { return time.Time{}, "", false }
	observer, err := kubestore.New(kubestore.Config{Client: obs, Namespace: testNamespace, Gate: gate,
		NodeLease: &kubestore.NodeLeaseConfig{Heartbeat: none}})
	require.NoError(t, err)
	var mu sync.Mutex
	proxies := map[string]*servers.Proxy{} // each node's current proxy
	return storecheck.Backend{
		Observer: observer,
		Connect: func(tb testing.TB, node string) storecheck.Conn {
			p, err := servers.StartProxy(a.Addr())
			require.NoError(tb, err)
			tb.Cleanup(func() { p.Close() })
			mu.Lock()
			proxies[node] = p
			mu.Unlock()
			cs := proofClientCounted(tb, a, p.Addr(), wire, node)
			nc, err := nodestatus.New(nodestatus.Config{
				Client: cs, Node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}},
				LeaseDuration: leaseDuration, RenewInterval: leaseDuration / 4,
			})
			require.NoError(tb, err)
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { defer close(done); _ = nc.Run(ctx) }()
			var once sync.Once
			stop := func() { once.Do(func() { cancel(); <-done }) }
			tb.Cleanup(stop)
			require.Eventually(tb, func() bool { _, _, ok := nc.LeaseRenewal(node); return ok }, time.Minute, 10*time.Millisecond)
			st, err := kubestore.New(kubestore.Config{Client: cs, Namespace: testNamespace, Gate: gate,
				NodeLease: &kubestore.NodeLeaseConfig{Heartbeat: nc.LeaseRenewal}})
			require.NoError(tb, err)
			el, err := lease.New(lease.Config{
				Client: cs, Namespace: testNamespace, Name: "election-" + gate, Identity: node,
				LeaseDuration: proofLeaseDuration, RenewDeadline: proofRenewDeadline, RetryPeriod: proofRetryPeriod,
			})
			require.NoError(tb, err)
			return storecheck.Conn{Store: st, Candidate: el, Close: func(crash bool) {
				if crash {
					p.Cut() // nothing more reaches the apiserver
					p.Close()
				}
				_ = el.Close()
				stop()
				p.Close()
			}}
		},
		Partition: func(node string, cut bool) {
			mu.Lock()
			p := proxies[node]
			mu.Unlock()
			if cut {
				p.Cut()
			} else {
				p.Restore()
			}
		},
		ValidatedAfterWrite: true,
		// A keep-alive reports a record lost when its liveness lapses;
		// the reaper deletes it later, so listings may still show it.
		LostRecordsLinger: true,
		// As kubeBackend's.
		WatchTooOld: func(err error) bool { return errors.Is(err, kubestore.ErrWatchExpired) },
		WatchWindow: true,
		RestartServer: func(tb testing.TB) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			start := time.Now()
			require.NoError(tb, a.Restart(ctx))
			tb.Logf("apiserver restarted in %v", time.Since(start).Round(time.Millisecond))
		},
	}
}

// A rolling upgrade of 5 gates with records on node Leases that
// nodestatus renews, on a real kube-apiserver with the Lease election:
// crashes, restarts, partitions through cut proxies (which stop a node's
// heartbeat with its gate) and an apiserver restart; no node serves below
// the reconciled minimum at any step, the upgrade completes, and every
// store operation is linearizable. A record's TTL is its node Lease's
// duration, 4s here, so that a crashed node's record holds the upgrade
// briefly: RecordTTL is not used in this mode.
func TestNodeLeaseProofRollingUpgrade(t *testing.T) {
	t.Parallel() // on an apiserver of its own; waits on leases and TTLs more than on the CPU
	storecheck.RunRolling(t, nodeLeaseProofBackend(t, 4*time.Second), storecheck.RollingConfig{
		Seed: storecheck.Seed(t), Nodes: 5, Steps: 24, Context: proofContext(t),
		ServerRestarts: 1,
	})
}

// Joiners race the leader's restrict with records on node Leases that
// nodestatus renews, every listing 100ms late and every record watch
// batch 30ms late: none serves past the restricted status, and the
// history is linearizable.
func TestNodeLeaseProofJoinersRace(t *testing.T) {
	t.Parallel() // on an apiserver of its own; waits on leases and TTLs more than on the CPU
	storecheck.ProveJoiners(t, nodeLeaseProofBackend(t, proofJoinersTTL), storecheck.JoinersConfig{
		Seed: storecheck.Seed(t), ListDelay: 100 * time.Millisecond, WatchDelay: 30 * time.Millisecond, Context: proofContext(t),
	})
}

// And with joiners reading a cache taken before the restrict, the race
// fails: the drivers can tell.
func TestNodeLeaseProofJoinersRaceStaleCacheFails(t *testing.T) {
	t.Parallel() // on an apiserver of its own; waits on leases and TTLs more than on the CPU
	storecheck.ProveStaleCacheFails(t, nodeLeaseProofBackend(t, proofJoinersTTL), storecheck.JoinersConfig{
		Seed: storecheck.Seed(t), ListDelay: 100 * time.Millisecond, Context: proofContext(t), Timeout: 2 * time.Minute, // a bound, not a goal: a starved run took more than 30 s to restrict
	})
}

// Two leaders race the fence with records on node Leases, while a
// heartbeat renews those Leases as fast as it can: one leader writes the
// status in a loop, each write conditioned on the records it just listed
// (and so validated after it is applied), while the other fences with a
// higher token: in a third of the rounds at a random moment, in the
// others just before the lower term's write reaches the server, or just
// before the update that drops that write's unvalidated mark. The lower
// term's store watches the records meanwhile, as a leading gate does, so
// it sees the renewals. On the status Lease's own history no write of the
// lower term follows the higher term's fence, and no renewal counts as a
// record change: the lower term's writes end only in ErrLeadershipLost,
// never in ErrNodesChanged.
func TestNodeLeaseTwoLeadersRaceTheFence(t *testing.T) {
	t.Parallel() // on an apiserver of its own; waits on leases and TTLs more than on the CPU
	cfg := apiServer(t)
	cs := clientFor(t, cfg)
	createNamespace(t, cs, nodeLeaseNamespace)
	ctx := testCtx(t)
	r := newRenewer(cs, clock.RealClock{})
	nodes := []string{"fence-node-0", "fence-node-1", "fence-node-2"}
	for round := range 12 {
		gate := uniqueGate("hbrace")
		pub := newNodeLeaseStore(t, cs, gate, nil, r.renew)
		for _, n := range nodes {
			_, err := pub.PublishRecord(ctx, n, []byte("1.0.0"), 0)
			require.NoError(t, err)
		}
		acs, ah := wrap(cs)
		a, b := newNodeLeaseStore(t, acs, gate, nil, r.renew), newNodeLeaseStore(t, cs, gate, nil, r.renew)
		ta, tb := versiongatetest.NewTerm("a", uint64(10+2*round)), versiongatetest.NewTerm("b", uint64(11+2*round))
		require.NoError(t, a.Fence(ctx, ta))
		require.NoError(t, a.WriteStatus(ctx, ta, []byte("a-0"), 0))
		l, err := cs.CoordinationV1().Leases(testNamespace).Get(ctx, gate+"-status", metav1.GetOptions{})
		require.NoError(t, err)
		w, err := cs.CoordinationV1().Leases(testNamespace).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + gate + "-status", ResourceVersion: l.ResourceVersion})
		require.NoError(t, err)

		var written, renewals atomic.Int64
		fenced := make(chan struct{}) // closed once b fenced from a's hook
		if round%3 != 0 {
			marked := round%3 == 1 // the write itself, or the update dropping its mark
			var once atomic.Bool
			ah.set(func(h *hooks) {
				h.beforeUpdate = func(l *coordinationv1.Lease) error {
					_, m := l.Annotations[kubestore.AnnotationUnvalidated]
					if l.Name == gate+"-status" && m == marked && written.Load() >= 2 && once.CompareAndSwap(false, true) {
						assert.NoError(t, b.Fence(ctx, tb))
						close(fenced)
					}
					return nil
				}
			})
		}
		rctx, stopRenewing := context.WithCancel(ctx)
		var wg sync.WaitGroup
		wg.Add(4)
		go func() {
			// a watches the records as a leading gate does: the
			// renewals reach its tracker.
			defer wg.Done()
			_, rev, err := a.ListRecords(rctx)
			for rctx.Err() == nil {
				if err == nil {
					err = a.WatchRecords(rctx, rev, func([]versiongate.Record, int64) {})
				}
				if rctx.Err() == nil {
					_, rev, err = a.ListRecords(rctx)
				}
			}
		}()
		go func() {
			defer wg.Done()
			for i := 0; rctx.Err() == nil; i++ {
				if _, _, ok := r.renew(nodes[i%len(nodes)]); ok {
					renewals.Add(1)
				}
			}
		}()
		var last error
		aDone := make(chan struct{})
		go func() {
			defer wg.Done()
			defer close(aDone)
			for i := 1; ; i++ {
				rs, rev, err := a.ListRecords(ctx)
				if !assert.NoError(t, err) {
					return
				}
				assert.Len(t, rs, len(nodes))
				if err := a.WriteStatus(ctx, ta, fmt.Appendf(nil, "a-%d", i), rev); err != nil {
					assert.ErrorIs(t, err, versiongate.ErrLeadershipLost)
					last = err
					return
				}
				written.Add(1)
			}
		}()
		go func() {
			defer wg.Done()
			defer stopRenewing()
			if round%3 == 0 {
				// Let a's conditioned writes meet some renewals first.
				for written.Load() < 2 && renewals.Load() < 20 && rctx.Err() == nil {
					<-time.After(5 * time.Millisecond)
				}
				if !assert.NoError(t, b.Fence(ctx, tb)) {
					return
				}
			} else {
				// b writes once a gave up, so that nothing but the
				// server's refusal keeps a's late writes out.
				<-aDone
				select {
				case <-fenced:
				default:
					t.Errorf("round %d: a's write never reached the hook", round)
					return
				}
			}
			assert.NoError(t, b.WriteStatus(ctx, tb, []byte("b"), 0))
		}()
		wg.Wait()
		t.Logf("round %d: %d conditioned writes by a stood, %d renewals; a stopped on: %v", round, written.Load(), renewals.Load(), last)

		followFence(t, cs, gate, w, tb, round)
		w.Stop()
	}
}
