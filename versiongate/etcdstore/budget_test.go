package etcdstore_test

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/reconkit/reconkit/election/etcd"
	"github.com/reconkit/reconkit/internal/testenv"
	"github.com/reconkit/reconkit/versiongate"
	"github.com/reconkit/reconkit/versiongate/etcdstore"
)

// budgetAnswer is what a faulty etcd (or the network before it) answers
// every request of one node with, once armed.
type budgetAnswer struct {
	name string
	code codes.Code // a gRPC status for every request; codes.OK for none
	// watch answers every watch: "ends" closes it at once with no event,
	// "compacted" cancels it with etcd's compaction error.
	watch string
	// refused closes the proxy the node talks through: every connection
	// attempt is refused.
	refused bool
}

var budgetAnswers = []budgetAnswer{
	{name: "Unavailable", code: codes.Unavailable},
	{name: "ResourceExhausted", code: codes.ResourceExhausted},
	{name: "PermissionDenied", code: codes.PermissionDenied},
	{name: "Unauthenticated", code: codes.Unauthenticated},
	{name: "DeadlineExceeded", code: codes.DeadlineExceeded},
	{name: "connection refused", refused: true},
	{name: "watch ends at once", watch: "ends"},
	{name: "compacted revision", watch: "compacted"},
}

// budgetKeys are one case's keys: the store's and the election's.
type budgetKeys struct {
	status, fence, nodes, election string
}

// loopOf names the loop a request belongs to by the keys it is about: the
// node records (publish, the keep-alive's check, listing and watch), the
// status (reads, watch, the leader's writes and fence), the election (the
// elector's reads and watches, the leader's guard check in Fence), and
// the leases (grants, keep-alives and revokes of the record's and of the
// election's, which carry no key: one bucket for both loops).
func (k budgetKeys) loopOf(keys []string) string {
	loop := "leases"
	for _, key := range keys {
		switch {
		case key == k.status || key == k.fence:
			return "status"
		case strings.HasPrefix(key, k.nodes):
			loop = "records"
		case strings.HasPrefix(key, k.election) && loop == "leases":
			loop = "election"
		}
	}
	return loop
}

// requestKeys returns the keys a unary request is about: a range's, and
// every compare's and operation's of a transaction, nested ones too.
func requestKeys(req any) []string {
	switch r := req.(type) {
	case *etcdserverpb.RangeRequest:
		return []string{string(r.Key)}
	case *etcdserverpb.PutRequest:
		return []string{string(r.Key)}
	case *etcdserverpb.DeleteRangeRequest:
		return []string{string(r.Key)}
	case *etcdserverpb.TxnRequest:
		var keys []string
		for _, c := range r.Compare {
			keys = append(keys, string(c.Key))
		}
		for _, op := range append(slices.Clone(r.Success), r.Failure...) {
			switch {
			case op.GetRequestRange() != nil:
				keys = append(keys, requestKeys(op.GetRequestRange())...)
			case op.GetRequestPut() != nil:
				keys = append(keys, requestKeys(op.GetRequestPut())...)
			case op.GetRequestDeleteRange() != nil:
				keys = append(keys, requestKeys(op.GetRequestDeleteRange())...)
			case op.GetRequestTxn() != nil:
				keys = append(keys, requestKeys(op.GetRequestTxn())...)
			}
		}
		return keys
	}
	return nil
}

// budgetNode is one node's etcd client, through a proxy of its own so
// that its connections can be refused; every request it sends is counted
// per loop, stamped with the fake clock, and answered by the fault once
// armed.
type budgetNode struct {
	name  string
	keys  budgetKeys
	clk   *testingclock.FakeClock
	ans   budgetAnswer
	armed atomic.Bool
	proxy *testenv.ProxyServer
	// armedCh closes when the fault is armed; watches counts the
	// goroutines that forward watches from before it.
	armedCh chan struct{}
	watches sync.WaitGroup

	mu       sync.Mutex
	counting bool
	armedAt  time.Time
	sent     []budgetRequest
}

type budgetRequest struct {
	at   time.Duration // from the arming, on the fake clock
	loop string
}

func (n *budgetNode) record(loop string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.counting {
		n.sent = append(n.sent, budgetRequest{at: n.clk.Since(n.armedAt), loop: loop})
	}
}

func (n *budgetNode) arm() {
	n.mu.Lock()
	n.armedAt, n.counting = n.clk.Now(), true
	n.mu.Unlock()
	n.armed.Store(true)
	close(n.armedCh)
	if n.ans.refused {
		_ = n.proxy.Close() // nothing listens on its port any more
		return
	}
	// Every stream open before ends, as on a server restart, so that every
	// loop meets the answer at once.
	n.proxy.DropConnections()
}

func (n *budgetNode) fault() error {
	if n.armed.Load() && n.ans.code != codes.OK {
		return status.Error(n.ans.code, "injected: "+n.ans.name)
	}
	return nil
}

// unary counts every unary request sent on the wire, each retry of the
// etcd client's own included (its retry interceptor runs outside this
// one).
func (n *budgetNode) unary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	n.record(n.keys.loopOf(requestKeys(req)))
	if err := n.fault(); err != nil {
		return err
	}
	return invoker(ctx, method, req, reply, cc, opts...)
}

// stream counts every keep-alive stream opened (the store's KeepAlive and
// the elector's renewals open one each; so does the session keep-alive of
// the client library, on its own) in the leases loop, and answers the
// fault on every stream open. Watches are counted by the Watcher, which
// multiplexes them on one stream.
func (n *budgetNode) stream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	if strings.HasSuffix(method, "/LeaseKeepAlive") {
		n.record("leases")
	}
	if err := n.fault(); err != nil {
		return nil, err
	}
	return streamer(ctx, desc, cc, method, opts...)
}

// budgetWatcher counts each watch asked for and answers the watch faults.
type budgetWatcher struct {
	clientv3.Watcher
	n *budgetNode
}

func (w *budgetWatcher) Watch(ctx context.Context, key string, opts ...clientv3.OpOption) clientv3.WatchChan {
	n := w.n
	n.record(n.keys.loopOf([]string{key}))
	if n.ans.watch == "" {
		return w.Watcher.Watch(ctx, key, opts...)
	}
	out := make(chan clientv3.WatchResponse)
	if n.armed.Load() {
		go n.answerWatch(ctx, out)
		return out
	}
	// A watch from before the fault meets it once armed: the client
	// library would otherwise resume it on its own.
	in := w.Watcher.Watch(ctx, key, opts...)
	n.watches.Add(1)
	go func() {
		defer n.watches.Done()
		for {
			select {
			case <-n.armedCh:
				n.answerWatch(ctx, out)
				return
			case wr, ok := <-in:
				if !ok {
					close(out)
					return
				}
				select {
				case out <- wr:
				case <-n.armedCh:
					n.answerWatch(ctx, out)
					return
				case <-ctx.Done():
					close(out)
					return
				}
			}
		}
	}()
	return out
}

// answerWatch ends a watch at once, or cancels it with etcd's compaction
// error.
func (n *budgetNode) answerWatch(ctx context.Context, out chan clientv3.WatchResponse) {
	defer close(out)
	if n.ans.watch == "compacted" {
		select {
		case out <- clientv3.WatchResponse{CompactRevision: 1, Canceled: true}:
		case <-ctx.Done():
		}
	}
}

// newBudgetNode builds a node's client as election/etcd's documentation
// asks (MaxUnaryRetries 1: with the etcd client's default, a read
// answered Unavailable is resent up to 100 times, 25 ms apart on real
// time, whatever the library's backoff).
func newBudgetNode(t *testing.T, srv *testenv.EtcdCluster, clk *testingclock.FakeClock, ans budgetAnswer, keys budgetKeys, name string) (*budgetNode, *clientv3.Client) {
	t.Helper()
	n := &budgetNode{name: name, keys: keys, clk: clk, ans: ans, armedCh: make(chan struct{})}
	t.Cleanup(n.watches.Wait)
	n.proxy = testenv.Proxy(t, srv.Members[0].ClientAddr())
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:            []string{"http://" + n.proxy.Addr()},
		DialTimeout:          5 * time.Second,
		DialKeepAliveTime:    2 * time.Second,
		DialKeepAliveTimeout: 2 * time.Second,
		MaxUnaryRetries:      1,
		Logger:               zap.NewNop(),
		DialOptions: []grpc.DialOption{
			grpc.WithChainUnaryInterceptor(n.unary),
			grpc.WithChainStreamInterceptor(n.stream),
		},
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = cli.Close() })
	cli.Watcher = &budgetWatcher{Watcher: cli.Watcher, n: n}
	return n, cli
}

// window returns the requests sent in [from, to) of fake time after the
// arming: their instants, and their count per loop.
func (n *budgetNode) window(from, to time.Duration) ([]time.Duration, map[string]int) {
	n.mu.Lock()
	defer n.mu.Unlock()
	var at []time.Duration
	perLoop := map[string]int{}
	for _, r := range n.sent {
		if r.at >= from && r.at < to {
			at = append(at, r.at)
			perLoop[r.loop]++
		}
	}
	return at, perLoop
}

// TestEveryLoopOfEtcdNodesKeepsItsBudget holds the library's request
// budget for versiongate on etcdstore, on a real etcd: two nodes run
// versiongate.Run with default settings and RejoinAfterRecordLoss, elected
// by election/etcd, all on one fake clock. One is ready and leads (its
// initial reconcile done); the other, a newer release that needs a newer
// reconciler, campaigns behind it and waits in WaitReady. Then every
// request of each is answered the same way for 90 s of fake time (every
// open stream ended with it). From 30 s to 90 s each loop of each node
// (records: publish, the keep-alive's check, listing and watch; status:
// reads, watch, the leader's fence and writes, the readiness wait's
// watch; election; leases: the record's and the election's grants,
// keep-alives and revokes, one bucket) sends at most one request a second
// (60), counting every unary request on the wire, every watch and every
// keep-alive stream; the two nodes send at different instants (jitter).
//
// Both the record's keep-alives and the election's renewals run on the
// fake clock (Clock and RecordClock), while etcd expires leases on real
// time: the nodes are armed within a few real seconds of their start,
// well inside the 10 s TTLs, and then the fault lets no keep-alive
// through anyway.
//
// Requests are stamped with the fake clock when sent. The clock is
// stepped 250 ms at a time with a short real wait between steps; a
// request that a loaded machine sends late is stamped later, by a step or
// two.
func TestEveryLoopOfEtcdNodesKeepsItsBudget(t *testing.T) {
	srv := testenv.Etcd(t)
	for i, ans := range budgetAnswers {
		t.Run(ans.name, func(t *testing.T) {
			t.Parallel()
			runEtcdBudget(t, srv, fmt.Sprintf("/budget-%d", i), ans)
		})
	}
}

func runEtcdBudget(t *testing.T, srv *testenv.EtcdCluster, prefix string, ans budgetAnswer) {
	keys := budgetKeys{status: prefix + "/status", fence: prefix + "/status.fence", nodes: prefix + "/nodes/", election: prefix + "/leader"}
	clk := testingclock.NewFakeClock(time.Now())
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var nodes []*budgetNode
	t.Cleanup(func() {
		for _, n := range nodes {
			n.armed.Store(false)
		}
		cancel()
		wg.Wait()
	})
	start := func(name, version, minCompat string) *versiongate.Gate {
		n, cli := newBudgetNode(t, srv, clk, ans, keys, name)
		nodes = append(nodes, n)
		st, err := etcdstore.New(cli, etcdstore.Config{StatusKey: keys.status, NodesPrefix: keys.nodes})
		require.NoError(t, err)
		el, err := etcd.New(etcd.Config{Client: cli, Prefix: keys.election, Identity: name, Clock: clk})
		require.NoError(t, err)
		t.Cleanup(func() { _ = el.Close() })
		g, err := versiongate.New(versiongate.Config{
			Store: st, NodeID: name, Version: ver(t, version),
			MinimumCompatibleRelease: rel(t, minCompat),
			Candidate:                el,
			Reconcile:                func(context.Context, versiongate.Term) error { return nil },
			Clock:                    clk,
			RecordClock:              clk,
			SettleTime:               -1,
			RejoinAfterRecordLoss:    true,
		})
		require.NoError(t, err)
		wg.Go(func() { _ = g.Run(ctx) })
		return g
	}
	leader := start("leader", "1.4.0", "1.3.0")
	require.NoError(t, leader.WaitReady(ctx))
	waitPhase(t, leader, versiongate.PhaseDone)
	waiting := start("waiting", "1.2.0", "1.2.0")
	wg.Go(func() { _ = waiting.WaitReady(ctx) })
	// The waiting node has published its record.
	admin := srv.Client(t)
	eventually(t, func() bool {
		rec, err := admin.Get(ctx, keys.nodes, clientv3.WithPrefix(), clientv3.WithCountOnly())
		return err == nil && rec.Count == 2
	}, "two records")
	require.False(t, waiting.Ready(), "the waiting node is not admitted")

	for _, n := range nodes {
		n.arm()
	}
	const step = 250 * time.Millisecond
	for range int(90 * time.Second / step) {
		clk.Step(step)
		// A short real pause lets the loops the step woke send.
		select {
		case <-time.After(20 * time.Millisecond):
		case <-ctx.Done():
		}
	}
	var late [][]time.Duration
	for _, n := range nodes {
		early, _ := n.window(0, 30*time.Second)
		at, perLoop := n.window(30*time.Second, 90*time.Second)
		lines := make([]string, 0, len(perLoop))
		for loop, c := range perLoop {
			lines = append(lines, fmt.Sprintf("%s %.2f/s", loop, float64(c)/60))
		}
		sort.Strings(lines)
		t.Logf("%s (%s): %d requests in the first 30 s; from 30 s to 90 s %.2f/s in all; %s",
			n.name, ans.name, len(early), float64(len(at))/60, strings.Join(lines, ", "))
		for loop, c := range perLoop {
			require.LessOrEqual(t, c, 60, "%s: loop %q sent %d requests from 30 s to 90 s of %s", n.name, loop, c, ans.name)
		}
		late = append(late, at)
	}
	if len(late[0]) > 1 && len(late[1]) > 1 {
		require.False(t, slices.Equal(late[0], late[1]), "the two nodes sent at the same instants: no jitter")
	}
}
