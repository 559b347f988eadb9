package kubestore_test

import (
	"context"
	"errors"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/reconkit/reconkit/election/lease"
	"github.com/reconkit/reconkit/internal/servers"
	"github.com/reconkit/reconkit/internal/testenv"
	"github.com/reconkit/reconkit/versiongate"
	"github.com/reconkit/reconkit/versiongate/internal/storecheck"
	"github.com/reconkit/reconkit/versiongate/kubestore"
)

// The Lease election's timing in the proofs: short enough for a failover
// within a few seconds, long enough that a renewal survives a loaded
// machine.
const (
	proofLeaseDuration = 5 * time.Second
	proofRenewDeadline = 4 * time.Second
	proofRetryPeriod   = time.Second
)

// kubeBackend is the Kubernetes store on a fresh kube-apiserver for the
// storecheck drivers, with reconkit's Lease election, whose terms the
// store fences by their token. Each start of a node gets a client of its
// own through a proxy of its own, which Partition cuts: a cut holds the
// node's requests, store and election alike, and delivers them when
// healed. A crash cuts and closes the proxy, so nothing the node sends
// later reaches the server: its election Lease expires, and its record is
// reaped by the observers that judge it dead. RestartServer restarts the
// apiserver on the same port and storage.
func kubeBackend(t *testing.T) storecheck.Backend {
	t.Helper()
	a := testenv.APIServer(t)
	obs := proofClient(t, a, a.Addr())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := obs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: testNamespace}}, metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) {
		require.NoError(t, err, "creating the test namespace")
	}
	gate := "proof"
	wire := newWireCounts(t)
	var mu sync.Mutex
	proxies := map[string]*servers.Proxy{} // each node's current proxy
	return storecheck.Backend{
		Observer: proofStore(t, obs, gate),
		Connect: func(tb testing.TB, node string) storecheck.Conn {
			p, err := servers.StartProxy(a.Addr())
			require.NoError(tb, err)
			tb.Cleanup(func() { p.Close() })
			mu.Lock()
			proxies[node] = p
			mu.Unlock()
			cs := proofClientCounted(tb, a, p.Addr(), wire, node)
			el, err := lease.New(lease.Config{
				Client: cs, Namespace: testNamespace, Name: "election-" + gate, Identity: node, // not a record name: those are <gate>-<node>
				LeaseDuration: proofLeaseDuration, RenewDeadline: proofRenewDeadline, RetryPeriod: proofRetryPeriod,
			})
			require.NoError(tb, err)
			return storecheck.Conn{Store: proofStore(tb, cs, gate), Candidate: el, Close: func(crash bool) {
				if crash {
					p.Cut() // nothing more reaches the apiserver
					p.Close()
				}
				_ = el.Close()
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
		// WriteStatus applies a conditioned write, then validates it, and
		// undoes it if refused: readers may see it meanwhile.
		ValidatedAfterWrite: true,
		// A keep-alive reports a record lost when its liveness lapses;
		// the reaper deletes it later, so listings may still show it.
		LostRecordsLinger: true,
		// 410 Gone ends a watch whose revision the apiserver no longer
		// serves: its watch cache is a window that moves on by itself,
		// and starts anew at a restart.
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

func proofClient(t testing.TB, a *testenv.APIServerInstance, addr string) kubernetes.Interface {
	t.Helper()
	return proofClientCounted(t, a, addr, nil, "")
}

// proofClientCounted is proofClient with its requests counted as node's
// in w (nil: not counted).
func proofClientCounted(t testing.TB, a *testenv.APIServerInstance, addr string, w *wireCounts, node string) kubernetes.Interface {
	t.Helper()
	cfg := a.ConfigFor(addr)
	if w != nil {
		cfg = w.config(node, cfg)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	return cs
}

func proofStore(t testing.TB, cs kubernetes.Interface, gate string) versiongate.Store {
	t.Helper()
	st, err := kubestore.New(kubestore.Config{Client: cs, Namespace: testNamespace, Gate: gate})
	require.NoError(t, err)
	return st
}

// proofContext carries a logger that passes the gates' and stores' error
// logs (every log with VERSIONGATE_LOG=all) to the test log while the
// test runs.
func proofContext(t *testing.T) context.Context {
	var done atomic.Bool
	t.Cleanup(func() { done.Store(true) })
	all := os.Getenv("VERSIONGATE_LOG") == "all"
	log := funcr.New(func(prefix, args string) {
		if !done.Load() && (all || strings.Contains(args, `"error"`)) {
			t.Logf("%s %s", prefix, args)
		}
	}, funcr.Options{})
	return logr.NewContext(context.Background(), log)
}

// A rolling upgrade of 5 gates on a real kube-apiserver with the Lease
// election: crashes, restarts, partitions through cut proxies and at
// least one apiserver restart; no node serves below the reconciled
// minimum at any step, the upgrade completes, and every store operation is
// linearizable. Across a restart the requests it cut off have unknown
// outcomes that stay open, dozens of publishes the gates retried: the
// checker counts them pending rather than trying each at every step, and
// decides the history; one it could not decide would fail the test.
func TestProofRollingUpgrade(t *testing.T) {
	t.Parallel() // on an apiserver of its own; waits on leases and TTLs more than on the CPU
	storecheck.RunRolling(t, kubeBackend(t), storecheck.RollingConfig{
		Seed: storecheck.Seed(t), Nodes: 5, Steps: 24, Context: proofContext(t),
		ServerRestarts: 1,
		// Observers reap a record TTL plus 500ms after they last saw it
		// change: a 3s TTL keeps crashed nodes' records from holding the
		// upgrade long, and leaves a keep-alive room on a loaded machine.
		RecordTTL: 3 * time.Second,
	})
}

// proofJoinersTTL is the joiners' RecordTTL in the joiners proofs. Every
// joiner and the leader must keep their records through the run: on a
// starved machine (one CPU, busy) keep-alives have gone unanswered for
// more than a 5s TTL allows. A longer TTL costs nothing while records are
// kept: joiners delete theirs as they stop. Only a record lost all the
// same holds the restrict until it expires, for at most TTL plus the
// margin, well within the driver's 60s waits.
const proofJoinersTTL = 15 * time.Second

// Joiners race the leader's restrict with every listing answering 100ms
// late and every record watch batch 30ms late: none serves past the
// restricted status, and the history is linearizable.
func TestProofJoinersRace(t *testing.T) {
	t.Parallel() // on an apiserver of its own; waits on leases and TTLs more than on the CPU
	storecheck.ProveJoiners(t, kubeBackend(t), storecheck.JoinersConfig{
		Seed: storecheck.Seed(t), ListDelay: 100 * time.Millisecond, WatchDelay: 30 * time.Millisecond, Context: proofContext(t),
		RecordTTL: proofJoinersTTL,
	})
}

// The same race with joiners that read the records and the status from a
// cache taken before the restrict, as an informer's would be: joiners
// serve past it, so the race can fail, and the checker rejects the
// history.
func TestProofJoinersRaceStaleCacheFails(t *testing.T) {
	t.Parallel() // on an apiserver of its own; waits on leases and TTLs more than on the CPU
	storecheck.ProveStaleCacheFails(t, kubeBackend(t), storecheck.JoinersConfig{
		Seed: storecheck.Seed(t), ListDelay: 100 * time.Millisecond, Context: proofContext(t), Timeout: 2 * time.Minute, // a bound, not a goal: a starved run took more than 30 s to restrict
		RecordTTL: proofJoinersTTL,
	})
}

// wireBudget is the most requests one node's clients in one incarnation
// (one Connect: its store, its election and, in the node-Lease mode, its
// heartbeat) may send in any wireWindow of a proof: its store calls
// within the storecheck budget, a few requests each (a keep-alive reads
// and updates; client-go retries a refused GET once a second for up to
// 10s), the election's renewals every
// RetryPeriod, and a heartbeat's every LeaseDuration/4. A status watch
// from a revision the server no longer serves, read and watched again
// every 100ms, sends some 200. It is counted per incarnation, as
// storecheck's budget is: each start sends a burst of some 25 requests
// (its node, heartbeat, record, election and reaper), and the drivers may
// restart or upgrade one node several times within a window (seed 108 of
// TestNodeLeaseProofRollingUpgrade started node-0 five times in 2s, 139
// requests in 10s from its incarnations together, its busiest
// incarnation 63).
const (
	wireWindow = 10 * time.Second
	wireBudget = 120
)

// wireCounts counts the requests each node's clients send on the wire,
// by node and incarnation, on the real clock.
type wireCounts struct {
	start time.Time
	mu    sync.Mutex
	sent  map[string][]time.Duration // by "node#incarnation"
	incs  map[string]int             // incarnations so far, by node
}

func newWireCounts(t *testing.T) *wireCounts {
	w := &wireCounts{start: time.Now(), sent: map[string][]time.Duration{}, incs: map[string]int{}}
	t.Cleanup(func() { w.check(t) })
	return w
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// config returns cfg counting every request it sends as those of a new
// incarnation of node.
func (w *wireCounts) config(node string, cfg *rest.Config) *rest.Config {
	w.mu.Lock()
	w.incs[node]++
	key := node + "#" + strconv.Itoa(w.incs[node])
	w.mu.Unlock()
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			w.mu.Lock()
			w.sent[key] = append(w.sent[key], time.Since(w.start))
			w.mu.Unlock()
			return rt.RoundTrip(r)
		})
	})
	return cfg
}

// check fails t for a node that sent more than wireBudget requests in
// some wireWindow, and logs the busiest.
func (w *wireCounts) check(t *testing.T) {
	w.mu.Lock()
	defer w.mu.Unlock()
	top, topNode, topFrom := 0, "", time.Duration(0)
	for node, sent := range w.sent {
		slices.Sort(sent)
		j := 0
		for i, at := range sent {
			for sent[j] <= at-wireWindow {
				j++
			}
			n := i - j + 1
			if n > top {
				top, topNode, topFrom = n, node, sent[j]
			}
		}
	}
	if top > wireBudget {
		t.Errorf("wire budget: %s sent %d requests in %v from %v, over the budget of %d: a loop spins or herds", topNode, top, wireWindow, topFrom.Round(time.Millisecond), wireBudget)
	}
	t.Logf("wire budget: busiest node %s sent %d requests in %v (budget %d)", topNode, top, wireWindow, wireBudget)
}

// cutAfterFirstCreate is a RoundTripper that passes requests until the
// first POST has been answered, and refuses every one after it: a node
// that crashes mid-publish, once the heartbeat Lease that claims its ID
// is made, before the record Lease, and before it could delete the
// heartbeat again.
type cutAfterFirstCreate struct {
	rt  http.RoundTripper
	cut atomic.Bool
}

func (c *cutAfterFirstCreate) RoundTrip(r *http.Request) (*http.Response, error) {
	if c.cut.Load() {
		return nil, errors.New("the node crashed")
	}
	resp, err := c.rt.RoundTrip(r)
	if r.Method == http.MethodPost {
		c.cut.Store(true)
	}
	return resp, err
}

// A node that crashes mid-publish leaves the heartbeat Lease that claims
// its ID, and no record. Started again, it is refused as held until that
// heartbeat is judged dead, while every listing rightly shows no record
// of it. The model accepts that history on this store: a publish here may
// be held by an earlier publish's claim (the rolling proof's history of
// seed 1795801056088642858 was rejected for it).
func TestProofHeldByACrashedPublishHeartbeat(t *testing.T) {
	t.Parallel() // on an apiserver of its own
	ctx := proofContext(t)
	a := testenv.APIServer(t)
	obs := proofClient(t, a, a.Addr())
	_, err := obs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: testNamespace}}, metav1.CreateOptions{})
	if !apierrors.IsAlreadyExists(err) {
		require.NoError(t, err, "creating the test namespace")
	}
	const gate, id = "claim", "node-2"
	rec := storecheck.NewRecorder(nil, storecheck.ValidatedAfterWrite(), storecheck.LostRecordsLinger())

	cfg := a.ConfigFor(a.Addr())
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { return &cutAfterFirstCreate{rt: rt} }
	crashing, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	_, err = rec.Wrap("node-2#1", proofStore(t, crashing, gate)).PublishRecord(ctx, id, []byte("1.0.0"), time.Minute)
	require.Error(t, err, "the publish cut after its heartbeat was made")
	require.NotErrorIs(t, err, versiongate.ErrRecordHeld)

	again := rec.Wrap("node-2#2", proofStore(t, proofClient(t, a, a.Addr()), gate))
	observer := rec.Wrap("observer", proofStore(t, obs, gate))
	for range 2 {
		_, err = again.PublishRecord(ctx, id, []byte("1.1.0"), time.Minute)
		require.ErrorIs(t, err, versiongate.ErrRecordHeld, "held by the crashed publish's heartbeat")
		recs, _, err := observer.ListRecords(ctx)
		require.NoError(t, err)
		require.Empty(t, recs, "no record was made")
	}
	storecheck.Check(t, rec.History())
}
